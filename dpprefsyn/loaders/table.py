"""The loaders' result: one polars table of pairs plus what was read and dropped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from dpprefsyn.loaders.records import Pair

COLUMNS: tuple[str, ...] = ("record_id", "prompt", "chosen", "rejected")
SCHEMA: dict[str, pl.DataType] = {name: pl.String() for name in COLUMNS}


def build_table(pairs: Sequence[Pair]) -> pl.DataFrame:
    """Stack checked pairs into the internal table (``fields`` is bookkeeping and is left out)."""
    return pl.DataFrame([pair[:4] for pair in pairs], schema=SCHEMA, orient="row")


@dataclass(frozen=True, eq=False, repr=False)
class PreferenceData:
    """Preference pairs loaded from one source, in the one table layout later stages read.

    The repr shows counts, format and source only: the table holds private text, and reprs end
    up in logs.

    Parameters
    ----------
    table : polars.DataFrame
        Exactly the string columns ``record_id``, ``prompt``, ``chosen``, ``rejected``, no nulls,
        unique ``record_id`` (stable across runs, e.g. ``"test.jsonl.gz:17"``).
    format : str
        The format the source was parsed as (resolved when ``"auto"`` was asked).
    source : str
        The path or hub name that was read.
    n_read : int
        Records read from the source (for ``oasst``: message trees).
    dropped : dict of str to int
        Records (for ``oasst``: pairs) dropped, by reason; see
        :data:`~dpprefsyn.loaders.records.REASONS` and ``"tie"``.
    """

    table: pl.DataFrame
    format: str
    source: str
    n_read: int
    dropped: dict[str, int]

    def __post_init__(self) -> None:
        """Reject a table of another layout; later stages rely on it without checking."""
        if list(self.table.schema.items()) != list(SCHEMA.items()):
            raise ValueError(
                f"table must have exactly the string columns {list(COLUMNS)}, "
                f"got {dict(self.table.schema)}"
            )
        if self.table.null_count().sum_horizontal().item():
            raise ValueError("table must not hold nulls")
        if self.table["record_id"].is_duplicated().any():
            raise ValueError("record_id must be unique")
        object.__setattr__(self, "dropped", dict(sorted(self.dropped.items())))

    def __len__(self) -> int:
        """Count the pairs."""
        return self.table.height

    def __repr__(self) -> str:
        """Show counts, format and source; never text."""
        return (
            f"PreferenceData(format={self.format!r}, source={self.source!r}, "
            f"n_pairs={len(self)}, n_read={self.n_read}, dropped={self.dropped})"
        )
