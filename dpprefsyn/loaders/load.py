"""The public entry point: any supported source in, one validated :class:`PreferenceData` out."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping

from dpprefsyn.errors import DataError
from dpprefsyn.loaders.detect import detect_format
from dpprefsyn.loaders.formats import REGISTRY
from dpprefsyn.loaders.formats.base import Parser
from dpprefsyn.loaders.readers import (
    WHOLE_FILE,
    Raw,
    check_load_options,
    read_source,
    rename_fields,
)
from dpprefsyn.loaders.records import WHOLE_RECORD, Pair, RecordError, Skip, check_pair
from dpprefsyn.loaders.table import PreferenceData, build_table

FORMATS: tuple[str, ...] = ("auto", *REGISTRY)
MAPPABLE_COLUMNS: tuple[str, ...] = ("prompt", "chosen", "rejected")


def _outcomes(raw: Raw, parse: Parser) -> list[Pair | Skip | RecordError]:
    """Everything one record yields, with its errors as values so the caller decides."""
    if raw.error is not None:
        return [raw.error]
    if not isinstance(raw.value, dict):
        return [RecordError(raw.record_id, WHOLE_RECORD, "not_an_object")]
    try:
        items = parse(raw.record_id, raw.value)
    except RecordError as err:
        return [err]
    outcomes: list[Pair | Skip | RecordError] = []
    for item in items:
        try:
            outcomes.append(item if isinstance(item, Skip) else check_pair(item))
        except RecordError as err:
            outcomes.append(err)
    return outcomes


def load_preferences(
    source: str | os.PathLike[str],
    *,
    format: str = "auto",
    on_error: str = "raise",
    split: str | None = None,
    columns: Mapping[str, str] | None = None,
) -> PreferenceData:
    """Load private preference pairs from a file, a saved dataset or a hub dataset.

    Every format goes through the same field and pair checks, so later stages can trust the
    table without knowing where it came from. Errors name the record and the field, never the
    text, because they end up in logs.

    Parameters
    ----------
    source : str or os.PathLike
        A ``.jsonl``, ``.json`` (list or lines), ``.parquet`` or ``.csv`` file, any of them
        ``.gz``-compressed; a directory written by ``datasets``' ``save_to_disk``; or a Hugging
        Face hub dataset name (used when no such path exists).
    format : str, default="auto"
        One of :data:`FORMATS`. ``"auto"`` lets the first records vote (see
        :func:`~dpprefsyn.loaders.detect.detect_format`).
    on_error : {"raise", "drop"}, default="raise"
        ``"raise"`` stops at the first bad record with a :class:`~dpprefsyn.errors.DataError`;
        ``"drop"`` skips it and counts it in ``PreferenceData.dropped`` by reason. Ties are
        dropped and counted as ``"tie"`` either way: they are valid but state no preference.
    split : str or None, default=None
        Split of a hub dataset or a saved ``DatasetDict``; ``None`` means ``"train"``.
    columns : mapping of str to str or None, default=None
        Canonical name -> source column name, for sources whose ``prompt``, ``chosen`` or
        ``rejected`` are named otherwise (e.g. ``{"prompt": "question"}``). Errors name the
        source column.

    Returns
    -------
    PreferenceData
        At least one pair; ``n_read`` and ``dropped`` account for every record read.

    Raises
    ------
    DataError
        A bad record (with ``on_error="raise"``), or a source that is unusable as a whole: no
        records, undetectable format, unreadable container, or no pair left after dropping.
    FileNotFoundError
        ``source`` is neither an existing path nor a loadable hub dataset.
    ValueError
        An option is not one of the allowed values.

    Examples
    --------
    >>> data = load_preferences("test.jsonl.gz", on_error="drop")  # doctest: +SKIP
    >>> data  # doctest: +SKIP
    PreferenceData(format='hh-rlhf', source='test.jsonl.gz', n_pairs=2304, n_read=2312, ...)
    """
    columns = dict(columns or {})
    check_load_options(format, FORMATS, on_error, columns, MAPPABLE_COLUMNS)
    label = os.fspath(source)
    raws = read_source(source, split=split)
    if not raws:
        raise DataError(label, WHOLE_FILE, "source holds no records")
    if columns:
        raws = [raw._replace(value=rename_fields(raw.value, columns)) for raw in raws]
    resolved = detect_format(raws, label) if format == "auto" else format
    parse = REGISTRY[resolved].parse

    pairs: dict[str, Pair] = {}
    dropped: Counter[str] = Counter()
    for raw in raws:
        for outcome in _outcomes(raw, parse):
            if isinstance(outcome, Pair) and outcome.record_id in pairs:
                outcome = RecordError(outcome.record_id, WHOLE_RECORD, "duplicate_id")
            match outcome:
                case Pair():
                    pairs[outcome.record_id] = outcome
                case Skip(reason=reason):
                    dropped[reason] += 1
                case RecordError(kind=kind) if on_error == "drop":
                    dropped[kind] += 1
                case RecordError():
                    raise outcome.renamed(columns) from None
    if not pairs:
        raise DataError(label, WHOLE_FILE, f"no usable pair; dropped {dict(dropped)}")
    return PreferenceData(
        table=build_table(list(pairs.values())),
        format=resolved,
        source=label,
        n_read=len(raws),
        dropped=dict(dropped),
    )
