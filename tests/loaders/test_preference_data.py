"""PreferenceData holds exactly the agreed table and never shows its text."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from dpprefsyn.loaders import PreferenceData


def _table(**overrides: list[object]) -> pl.DataFrame:
    columns = {"record_id": ["f:0", "f:1"], "prompt": ["p", "q"], "chosen": ["a", "c"]}
    columns |= {"rejected": ["b", "d"]} | overrides
    return pl.DataFrame(columns)


def _data(table: pl.DataFrame, dropped: dict[str, int] | None = None) -> PreferenceData:
    return PreferenceData(
        table=table, format="preference", source="f", n_read=3, dropped=dropped or {}
    )


def test_repr_shows_counts_not_text(canary):
    data = _data(_table(prompt=[canary, canary]), {"tie": 1, "empty_response": 2})
    assert repr(data) == (
        "PreferenceData(format='preference', source='f', n_pairs=2, n_read=3, "
        "dropped={'empty_response': 2, 'tie': 1})"
    )
    assert canary not in repr(data) and canary not in str(data)
    assert len(data) == 2


def test_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        _data(_table()).n_read = 0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (_table().drop("prompt"), "exactly the string columns"),
        (
            _table().select("prompt", "record_id", "chosen", "rejected"),
            "exactly the string columns",
        ),
        (_table().with_columns(extra=pl.lit("x")), "exactly the string columns"),
        (_table(chosen=[1, 2]), "exactly the string columns"),
        (_table(chosen=["a", None]), "nulls"),
        (_table(record_id=["f:0", "f:0"]), "unique"),
    ],
)
def test_rejects_a_table_of_another_shape(table, message):
    with pytest.raises(ValueError, match=message):
        _data(table)
