"""Two responses and human labels naming the better one (PandaLM, LLMBar and its re-packagings).

Labels are 1 or 2 (which response is better) or 0 (tie). With several annotators the majority of
the non-tie labels wins; no majority, or only ties, states no preference and the record is
dropped as ``"tie"``. Field checks run before the tie decision; the shared pair checks (empty or
identical responses) only run on records that state a preference.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from dpprefsyn.loaders.formats.base import Format
from dpprefsyn.loaders.records import Pair, RecordError, Skip, text_field


class _Layout(NamedTuple):
    prompt: tuple[str, ...]
    responses: tuple[str, str]
    labels: tuple[str, ...]


LAYOUTS: dict[str, _Layout] = {
    "PandaLM": _Layout(
        ("instruction", "input"),
        ("response1", "response2"),
        ("annotator1", "annotator2", "annotator3"),
    ),
    "LLMBar": _Layout(("input",), ("output_1", "output_2"), ("label",)),
}
"""Known field layouts, recognised by their response fields. Prompt parts are joined by a blank
line, leaving out empty ones (PandaLM's ``input`` is often empty)."""

_VOTES = {"0": 0, "1": 1, "2": 2}


def _layout(record: dict[str, object]) -> _Layout | None:
    return next((lay for lay in LAYOUTS.values() if set(lay.responses) <= record.keys()), None)


def looks_like(record: dict[str, object]) -> bool:
    """Both response fields of one known layout are present."""
    return _layout(record) is not None


def _vote(record: dict[str, object], record_id: str, field: str) -> int:
    if field not in record:
        raise RecordError(record_id, field, "missing_field")
    value = record[field]
    # bool is an int subclass: True must not count as label 1.
    if isinstance(value, bool) or not isinstance(value, int | str) or str(value) not in _VOTES:
        raise RecordError(record_id, field, "bad_label")
    return _VOTES[str(value)]


def _winner(votes: list[int]) -> int | None:
    """1 or 2 by majority of non-tie votes; None when that majority does not exist."""
    counts = Counter(vote for vote in votes if vote)
    if counts[1] == counts[2]:
        return None
    return 1 if counts[1] > counts[2] else 2


def parse(record_id: str, record: dict[str, object]) -> list[Pair | Skip]:
    """Order the two responses by the labels."""
    layout = _layout(record)
    if layout is None:
        fields = " or ".join(lay.responses[0] for lay in LAYOUTS.values())
        raise RecordError(record_id, fields, "missing_field")
    parts = [text_field(record, record_id, field) for field in layout.prompt]
    responses = [text_field(record, record_id, field) for field in layout.responses]
    winner = _winner([_vote(record, record_id, field) for field in layout.labels])
    if winner is None:
        return [Skip(record_id, "tie")]
    chosen, rejected = (0, 1) if winner == 1 else (1, 0)
    return [
        Pair(
            record_id,
            "\n\n".join(part for part in parts if part.strip()),
            responses[chosen],
            responses[rejected],
            fields=(layout.prompt[0], layout.responses[chosen], layout.responses[rejected]),
        )
    ]


FORMAT = Format(
    parse,
    looks_like,
    "two responses and labels: 'response1', 'response2', 'annotator1..3' (PandaLM) "
    "or 'output_1', 'output_2', 'label' (LLMBar)",
)
