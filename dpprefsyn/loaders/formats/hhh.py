"""BIG-bench HHH alignment as packaged by prometheus-eval: each side is a grading prompt.

``chosen_instruction`` and ``rejected_instruction`` wrap the same instruction and one response
each in the Prometheus absolute-grading template; the pair is cut back out of the template.
"""

from __future__ import annotations

import re

from dpprefsyn.loaders.formats.base import Format
from dpprefsyn.loaders.records import Pair, RecordError, Skip, text_field

TEMPLATE = re.compile(
    r"###The instruction to evaluate:\n(?P<instruction>.*)\n\n"
    r"###Response to evaluate:\n(?P<response>.*)\n\n###Score Rubrics:",
    re.DOTALL,
)


def looks_like(record: dict[str, object]) -> bool:
    """Both graded sides are present."""
    return {"chosen_instruction", "rejected_instruction"} <= record.keys()


def _unwrap(record: dict[str, object], record_id: str, field: str) -> tuple[str, str]:
    match = TEMPLATE.search(text_field(record, record_id, field))
    if match is None:
        raise RecordError(record_id, field, "template_mismatch")
    return match["instruction"], match["response"]


def parse(record_id: str, record: dict[str, object]) -> list[Pair | Skip]:
    """Cut instruction and response out of both grading prompts; the instructions must agree."""
    instruction, chosen = _unwrap(record, record_id, "chosen_instruction")
    other_instruction, rejected = _unwrap(record, record_id, "rejected_instruction")
    if instruction != other_instruction:
        raise RecordError(record_id, "rejected_instruction", "instruction_mismatch")
    fields = ("chosen_instruction", "chosen_instruction", "rejected_instruction")
    return [Pair(record_id, instruction, chosen, rejected, fields)]


FORMAT = Format(
    parse, looks_like, "'chosen_instruction', 'rejected_instruction' as Prometheus grading prompts"
)
