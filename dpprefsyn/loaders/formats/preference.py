"""Plain rows: prompt, chosen and rejected are already separate strings."""

from __future__ import annotations

from dpprefsyn.loaders.formats.base import Format
from dpprefsyn.loaders.records import Pair, Skip, text_field

_FIELDS = ("prompt", "chosen", "rejected")


def looks_like(record: dict[str, object]) -> bool:
    """All three fields, holding neither messages (``conversational``) nor a tree (``oasst``)."""
    return (
        set(_FIELDS) <= record.keys()
        and not isinstance(record["prompt"], dict | list)
        and not isinstance(record["chosen"], list)
    )


def parse(record_id: str, record: dict[str, object]) -> list[Pair | Skip]:
    """Take the three fields as they are."""
    prompt, chosen, rejected = (text_field(record, record_id, field) for field in _FIELDS)
    return [Pair(record_id, prompt, chosen, rejected)]


FORMAT = Format(parse, looks_like, "'prompt', 'chosen', 'rejected' as strings")
