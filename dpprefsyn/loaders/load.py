"""The public entry point: any supported source in, one validated :class:`PreferenceData` out."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping

from dpprefsyn.errors import DataError
from dpprefsyn.loaders.detect import detect_format
from dpprefsyn.loaders.formats import REGISTRY
from dpprefsyn.loaders.formats.base import Parser
from dpprefsyn.loaders.readers import WHOLE_FILE, Raw, read_source
from dpprefsyn.loaders.records import WHOLE_RECORD, Pair, RecordError, Skip, check_pair
from dpprefsyn.loaders.table import PreferenceData, build_table

FORMATS: tuple[str, ...] = ("auto", *REGISTRY)
ON_ERROR: tuple[str, ...] = ("raise", "drop")
MAPPABLE_COLUMNS: tuple[str, ...] = ("prompt", "chosen", "rejected")


def _check_options(format: str, on_error: str, columns: Mapping[str, str]) -> None:
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
    unknown = set(columns) - set(MAPPABLE_COLUMNS)
    if unknown:
        raise ValueError(f"columns keys must be among {MAPPABLE_COLUMNS}, got {sorted(unknown)}")
    if not all(isinstance(name, str) for name in columns.values()):
        raise ValueError("columns values must be source column names (strings)")


def _rename(value: object, columns: Mapping[str, str]) -> object:
    """Give a record the canonical field names; a source field already named so is ignored."""
    if not isinstance(value, dict):
        return value
    replaced = {*columns, *columns.values()}
    renamed = {key: item for key, item in value.items() if key not in replaced}
    renamed.update({canon: value[orig] for canon, orig in columns.items() if orig in value})
    return renamed


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
    _check_options(format, on_error, columns)
    label = os.fspath(source)
    raws = read_source(source, split=split)
    if not raws:
        raise DataError(label, WHOLE_FILE, "source holds no records")
    if columns:
        raws = [raw._replace(value=_rename(raw.value, columns)) for raw in raws]
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
