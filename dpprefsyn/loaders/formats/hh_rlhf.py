r"""Anthropic HH-RLHF: ``chosen`` and ``rejected`` are whole dialogues that share all but the end.

The prompt is the chosen dialogue through its last ``"\n\nAssistant:"``; each response is what
follows it, stripped. A rejected dialogue that does not start with that prompt is an error: the
two responses would answer different conversations.
"""

from __future__ import annotations

from dpprefsyn.loaders.formats.base import Format
from dpprefsyn.loaders.records import Pair, RecordError, Skip, text_field

ASSISTANT = "\n\nAssistant:"


def looks_like(record: dict[str, object]) -> bool:
    """``chosen`` and ``rejected`` without a ``prompt``, and not as message lists."""
    return (
        {"chosen", "rejected"} <= record.keys()
        and "prompt" not in record
        and not isinstance(record["chosen"], list)
    )


def parse(record_id: str, record: dict[str, object]) -> list[Pair | Skip]:
    """Split both dialogues at the chosen one's last assistant turn."""
    chosen = text_field(record, record_id, "chosen")
    rejected = text_field(record, record_id, "rejected")
    cut = chosen.rfind(ASSISTANT)
    if cut < 0:
        raise RecordError(record_id, "chosen", "no_assistant_turn")
    prompt = chosen[: cut + len(ASSISTANT)]
    if not rejected.startswith(prompt):
        raise RecordError(record_id, "rejected", "prefix_mismatch")
    return [
        Pair(
            record_id,
            prompt,
            chosen[len(prompt) :].strip(),
            rejected[len(prompt) :].strip(),
            fields=("chosen", "chosen", "rejected"),
        )
    ]


FORMAT = Format(parse, looks_like, "'chosen', 'rejected' as whole Human/Assistant dialogues")
