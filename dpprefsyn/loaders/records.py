"""What one record becomes, and the checks every format shares.

A parser turns one source record into :class:`Pair` items (or :class:`Skip` items for records that
state no preference). Whatever goes wrong with a record is a :class:`RecordError`: the loader
either raises it or drops the record and counts it under ``kind``, so nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from dpprefsyn.errors import DataError

REASONS: dict[str, str] = {
    "missing_field": "field is missing",
    "not_a_string": "expected a string",
    "not_utf8": "text is not valid UTF-8",
    "broken_json": "line is not valid JSON",
    "not_an_object": "record is not a JSON object",
    "empty_prompt": "prompt is empty or whitespace only",
    "empty_response": "response is empty or whitespace only",
    "identical_responses": "chosen and rejected responses are identical",
    "no_assistant_turn": "dialogue has no '\\n\\nAssistant:' turn",
    "prefix_mismatch": "chosen and rejected dialogues do not share the prompt",
    "bad_messages": "expected a non-empty list of {'role', 'content'} messages",
    "no_assistant_message": "messages hold no assistant message",
    "unknown_role": "unknown role",
    "bad_tree": "expected a message node (an object whose 'replies' is a list)",
    "bad_rank": "rank must be an integer or null",
    "bad_label": "label must be 0 (tie), 1 or 2",
    "duplicate_id": "record id repeats an earlier one (e.g. a message_id in two trees)",
    "template_mismatch": "text does not follow the Prometheus grading template",
    "instruction_mismatch": "chosen and rejected grade different instructions",
}
"""Short kind (the key of ``PreferenceData.dropped``) -> what the error message says."""


WHOLE_RECORD = "<record>"
"""The ``field`` of errors about a record as a whole (not JSON, not an object)."""


class RecordError(DataError):
    """A :class:`~dpprefsyn.errors.DataError` that also carries a short ``kind``.

    The kind is what ``on_error="drop"`` counts under, so counts stay comparable across files.
    ``detail`` may add a type name or a position, never the record's text.

    Parameters
    ----------
    record : str
        Stable id of the record.
    field : str
        The source field at fault; :data:`WHOLE_RECORD` when the whole record is unusable.
    kind : str
        A key of :data:`REASONS`.
    detail : str or None, default=None
        Extra words appended to the reason.
    """

    def __init__(self, record: str, field: str, kind: str, detail: str | None = None) -> None:
        self.kind = kind
        self.detail = detail
        reason = REASONS[kind] if detail is None else f"{REASONS[kind]} ({detail})"
        super().__init__(record, field, reason)

    def renamed(self, columns: Mapping[str, str]) -> RecordError:
        """Return this error naming the user's column, not the canonical one it was mapped to."""
        field = self.field
        for canonical, original in columns.items():
            if field == canonical or field.startswith((f"{canonical}[", f"{canonical}.")):
                field = original + field[len(canonical) :]
                break
        return RecordError(self.record, field, self.kind, self.detail)


class Pair(NamedTuple):
    """One (prompt, chosen, rejected) candidate and the source fields each part came from."""

    record_id: str
    prompt: str
    chosen: str
    rejected: str
    fields: tuple[str, str, str] = ("prompt", "chosen", "rejected")


class Skip(NamedTuple):
    """A well-formed record that yields no pair (a tie): always dropped and counted, not raised."""

    record_id: str
    reason: str


def json_type(value: object) -> str:
    """Name a value's type the way a JSON user would, for error messages that show no content."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def as_text(value: object, record_id: str, field: str) -> str:
    """Return ``value`` if it is a string that encodes as UTF-8, else raise :class:`RecordError`.

    Readers decode bytes with ``surrogateescape``, so undecodable input bytes survive as lone
    surrogates; failing to re-encode here is how such bytes are traced to their field.
    """
    if not isinstance(value, str):
        raise RecordError(record_id, field, "not_a_string", f"got {json_type(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RecordError(record_id, field, "not_utf8") from None
    return value


def text_field(
    record: Mapping[str, object], record_id: str, key: str, *, name: str | None = None
) -> str:
    """Read ``record[key]`` as text; errors name the field ``name`` (default: ``key``)."""
    field = key if name is None else name
    if key not in record:
        raise RecordError(record_id, field, "missing_field")
    return as_text(record[key], record_id, field)


def check_pair(pair: Pair) -> Pair:
    """Apply the checks every format shares and return the pair unchanged.

    Responses are compared after stripping whitespace: two responses that differ only in
    surrounding whitespace carry no preference.
    """
    prompt_field, chosen_field, rejected_field = pair.fields
    if not pair.prompt.strip():
        raise RecordError(pair.record_id, prompt_field, "empty_prompt")
    for text, field in ((pair.chosen, chosen_field), (pair.rejected, rejected_field)):
        if not text.strip():
            raise RecordError(pair.record_id, field, "empty_response")
    if pair.chosen.strip() == pair.rejected.strip():
        raise RecordError(pair.record_id, rejected_field, "identical_responses")
    return pair
