"""The contract every format module fulfils, so the registry can treat them alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from dpprefsyn.loaders.records import Pair, Skip

Parser = Callable[[str, dict[str, object]], list[Pair | Skip]]
"""``parse(record_id, record)``: the record's pairs, or raise ``RecordError``."""


class Format(NamedTuple):
    """One input format: how to parse a record and how to recognise one.

    ``looks_like`` must be cheap, must never raise, and must reject records of every other
    registered format, so that auto detection is a vote rather than an ordered if-chain.
    ``shape`` describes the records in a few words for the error raised when detection fails.
    """

    parse: Parser
    looks_like: Callable[[dict[str, object]], bool]
    shape: str
