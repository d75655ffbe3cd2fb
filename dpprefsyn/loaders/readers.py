"""Containers: turn a path or hub name into a list of raw records, before any format is known.

Each container reader yields every record it can find with a stable id. A record that cannot be
decoded (a broken JSON line) is kept as a :class:`Raw` carrying its error, so the loader can raise
it or drop and count it like any other bad record. Bytes are decoded with ``surrogateescape``:
undecodable bytes then reach the field checks, which name the field that holds them.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import polars as pl

from dpprefsyn.errors import DataError
from dpprefsyn.loaders.records import WHOLE_RECORD, RecordError

if TYPE_CHECKING:
    import datasets

WHOLE_FILE = "<file>"
"""The ``field`` of errors about the source as a whole; these are always raised."""


class Raw(NamedTuple):
    """One record as read: its id and decoded value, or the error that stopped decoding it."""

    record_id: str
    value: object
    error: RecordError | None = None


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape")


def _read_json_lines(path: Path, data: bytes) -> list[Raw]:
    """JSON Lines; ids are ``"<file name>:<0-based line index>"``, blank lines are skipped."""
    records = []
    for index, line in enumerate(data.split(b"\n")):
        if not line.strip():
            continue
        record_id = f"{path.name}:{index}"
        try:
            records.append(Raw(record_id, json.loads(_decode(line))))
        except (ValueError, RecursionError):
            records.append(
                Raw(record_id, None, RecordError(record_id, WHOLE_RECORD, "broken_json"))
            )
    return records


def _read_json_document(path: Path, data: bytes) -> list[Raw]:
    """Read a JSON list of records; ids are ``"<file name>:<0-based list index>"``."""
    try:
        document = json.loads(_decode(data))
    except (ValueError, RecursionError) as err:
        where = f" at line {err.lineno}, column {err.colno}" if hasattr(err, "lineno") else ""
        raise DataError(str(path), WHOLE_FILE, f"not valid JSON{where}") from None
    if not isinstance(document, list):
        raise DataError(str(path), WHOLE_FILE, "a JSON document must be a list of records")
    return [Raw(f"{path.name}:{index}", record) for index, record in enumerate(document)]


def _read_json(path: Path, data: bytes) -> list[Raw]:
    """``.json`` and ``.jsonl`` alike: a leading ``[`` means one JSON list, else JSON Lines."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    if data.lstrip()[:1] == b"[":
        return _read_json_document(path, data)
    return _read_json_lines(path, data)


def _read_parquet(path: Path, data: bytes) -> list[Raw]:
    """Parquet via polars; ids are ``"<file name>:<0-based row>"``; non-string columns stay so."""
    try:
        frame = pl.read_parquet(io.BytesIO(data))
    except (pl.exceptions.PolarsError, OSError):
        raise DataError(str(path), WHOLE_FILE, "not a readable Parquet file") from None
    return [
        Raw(f"{path.name}:{index}", row) for index, row in enumerate(frame.iter_rows(named=True))
    ]


def _read_csv(path: Path, data: bytes) -> list[Raw]:
    """CSV with a header row; ids are ``"<file name>:<0-based data row>"``.

    Python's csv module rather than polars: polars rejects the whole file at the first
    undecodable byte, so it cannot say which record holds it. A short row lacks its last fields.
    """
    reader = csv.DictReader(io.StringIO(_decode(data.removeprefix(b"\xef\xbb\xbf")), newline=""))
    try:
        rows = list(reader)
    except csv.Error as err:  # its messages name the problem, never the content
        reason = f"not valid CSV: {err} (line {reader.line_num})"
        raise DataError(str(path), WHOLE_FILE, reason) from None
    return [
        Raw(
            f"{path.name}:{index}",
            {k: v for k, v in row.items() if k is not None and v is not None},
        )
        for index, row in enumerate(rows)
    ]


CONTAINERS: dict[str, Callable[[Path, bytes], list[Raw]]] = {
    ".jsonl": _read_json,
    ".json": _read_json,
    ".parquet": _read_parquet,
    ".csv": _read_csv,
}
"""File extension (after removing ``.gz``) -> reader of the file's (decompressed) bytes."""


def _read_file(path: Path) -> list[Raw]:
    data = path.read_bytes()
    kind = path.suffix.lower()
    if kind == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            raise DataError(str(path), WHOLE_FILE, "not a valid gzip file") from None
        kind = Path(path.stem).suffix.lower()
    if kind not in CONTAINERS:
        raise DataError(
            str(path), WHOLE_FILE, f"unknown file type {kind!r}; expected one of {list(CONTAINERS)}"
        )
    return CONTAINERS[kind](path, data)


def _dataset_rows(dataset: datasets.Dataset, prefix: str) -> list[Raw]:
    return [Raw(f"{prefix}:{index}", row) for index, row in enumerate(dataset.to_list())]


def _read_saved_dataset(path: Path, split: str | None) -> list[Raw]:
    """Read a directory written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``.

    For a ``DatasetDict``, ``split`` (default ``"train"``) picks one; a ``Dataset`` ignores it.
    """
    if not ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file()):
        raise DataError(
            str(path), WHOLE_FILE, "directory was not written by datasets' save_to_disk"
        )
    import datasets

    dataset = datasets.load_from_disk(str(path))
    if isinstance(dataset, datasets.DatasetDict):
        split = split or "train"
        if split not in dataset:
            raise DataError(
                str(path), WHOLE_FILE, f"no split {split!r}; splits are {sorted(dataset)}"
            )
        return _dataset_rows(dataset[split], f"{path.name}[{split}]")
    return _dataset_rows(dataset, path.name)


def _read_hub(name: str, split: str | None) -> list[Raw]:
    import datasets

    split = split or "train"
    try:
        dataset = datasets.load_dataset(name, split=split)
    except Exception as err:  # the hub client raises many types; all mean "not available"
        raise FileNotFoundError(
            f"{name!r} is not a local path and could not be loaded from the Hugging Face hub "
            f"({type(err).__name__})"
        ) from err
    return _dataset_rows(dataset, f"{name}[{split}]")


def read_source(source: str | os.PathLike[str], *, split: str | None = None) -> list[Raw]:
    """Read every record of a file, a saved dataset directory or a Hugging Face hub dataset.

    A path that does not exist is taken for a hub name, unless it looks like a file (a known
    extension or ``.gz``), so that a mistyped path fails fast instead of querying the hub.
    """
    path = Path(source)
    if path.is_dir():
        return _read_saved_dataset(path, split)
    if path.is_file():
        return _read_file(path)
    if path.suffix.lower() in {*CONTAINERS, ".gz"}:
        raise FileNotFoundError(f"no such file: {os.fspath(source)!r}")
    return _read_hub(os.fspath(source), split)


ON_ERROR: tuple[str, ...] = ("raise", "drop")


def rename_fields(value: object, columns: Mapping[str, str]) -> object:
    """Give a record the canonical field names; a source field already named so is ignored."""
    if not isinstance(value, dict):
        return value
    replaced = {*columns, *columns.values()}
    renamed = {key: item for key, item in value.items() if key not in replaced}
    renamed.update({canon: value[orig] for canon, orig in columns.items() if orig in value})
    return renamed


def check_load_options(
    format: str,
    formats: Sequence[str],
    on_error: str,
    columns: Mapping[str, str],
    mappable: Sequence[str],
) -> None:
    """Reject a bad ``format``, ``on_error`` or ``columns`` before anything is read."""
    if format not in formats:
        raise ValueError(f"format must be one of {tuple(formats)}, got {format!r}")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
    unknown = set(columns) - set(mappable)
    if unknown:
        raise ValueError(f"columns keys must be among {tuple(mappable)}, got {sorted(unknown)}")
    if not all(isinstance(name, str) for name in columns.values()):
        raise ValueError("columns values must be source column names (strings)")
