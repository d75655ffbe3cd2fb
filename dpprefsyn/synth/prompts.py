"""Public prompts: any common public prompt set into one validated polars table.

Synthesis answers *public* prompts only, so nothing here touches private data; the checks still
mirror :mod:`dpprefsyn.loaders` (same containers, same :class:`RecordError` kinds, the same
raise-or-drop-and-count policy) so a bad public file fails the same way a bad private one does.

Each shape is one entry of :data:`PROMPT_FORMATS`: a parser and a cheap ``looks_like`` test. The
tests of different formats exclude each other, so ``format="auto"`` is a vote of the first
records, not an ordered if-chain.

The module is over the usual 400 lines because the registry, its eight small parsers, the XSum
archive reader they share with the pool backend, and the loader are one unit; splitting them
into a package is a mechanical move if it grows.
"""

from __future__ import annotations

import os
import re
import tarfile
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import NamedTuple

import polars as pl

from dpprefsyn.errors import DataError
from dpprefsyn.loaders.readers import (
    WHOLE_FILE,
    Raw,
    check_load_options,
    read_source,
    rename_fields,
)
from dpprefsyn.loaders.records import RecordError, as_text, json_type

CORE_COLUMNS: tuple[str, ...] = ("prompt_id", "prompt", "source")
"""Columns of every :class:`PromptSet` table; a format may add the ``extras`` it declares."""

MAPPABLE_COLUMNS: tuple[str, ...] = ("prompt", "prompt_id", "reference")
SAMPLE_SIZE = 20
"""Records that vote in auto detection; enough to outvote a few malformed ones at the top."""

FieldPath = tuple[str | int, ...]
Parsed = dict[str, str | None]


# --- field access: every error names the record and the field path, never the text ------------


def field_name(path: FieldPath) -> str:
    """Name a field path the way errors do: ``("turns", 0, "content")`` -> ``turns[0].content``."""
    name = ""
    for step in path:
        name += f"[{step}]" if isinstance(step, int) else (f".{step}" if name else step)
    return name or "<record>"


def get_field(record: object, record_id: str, *path: str | int) -> object:
    """Walk ``path`` (keys and list indices); a step that is absent is a ``missing_field``."""
    value = record
    for depth, step in enumerate(path):
        present = (
            isinstance(value, list) and 0 <= step < len(value)
            if isinstance(step, int)
            else isinstance(value, dict) and step in value
        )
        if not present:
            where = field_name(path[: depth + 1])
            raise RecordError(record_id, where, "missing_field", f"got {json_type(value)} above")
        value = value[step]  # type: ignore[index]
    return value


def _text(record: object, record_id: str, *path: str | int) -> str:
    return as_text(get_field(record, record_id, *path), record_id, field_name(path))


def _optional(record: object, record_id: str, *path: str | int) -> str | None:
    """Text at ``path``, or None where it is absent or null (metadata is never required)."""
    try:
        value = get_field(record, record_id, *path)
    except RecordError:
        return None
    return None if value is None else as_text(value, record_id, field_name(path))


def _prompt(record: object, record_id: str, *path: str | int, extra: str | None = None) -> str:
    """Read the prompt at ``path``; join a non-empty ``extra`` input the way Alpaca does."""
    prompt = _text(record, record_id, *path)
    if not prompt.strip():
        raise RecordError(record_id, field_name(path), "empty_prompt")
    return f"{prompt}\n\n{extra}" if extra and extra.strip() else prompt


def _own_id(record: dict[str, object], record_id: str, *keys: str) -> str:
    """Use the dataset's own id (first of ``keys`` present) if it has one, else the record id."""
    for key in keys:
        value = record.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    return record_id


def _object(value: object, record_id: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise RecordError(record_id, "<record>", "not_an_object", f"got {json_type(value)}")
    return value


def _is_dict_with(value: object, *keys: str) -> bool:
    return isinstance(value, dict) and all(key in value for key in keys)


def _first_turn_is(value: object, kind: type) -> bool:
    turns = value.get("turns") if isinstance(value, dict) else None
    return isinstance(turns, list) and bool(turns) and isinstance(turns[0], kind)


# --- formats ------------------------------------------------------------------------------------


class PromptFormat(NamedTuple):
    """One public prompt shape.

    ``parse(record_id, value)`` returns ``prompt_id``, ``prompt`` and the declared ``extras`` or
    raises :class:`RecordError`. ``looks_like`` must be cheap, never raise, and reject records of
    every other format. ``shape`` describes the records for the detection error.
    """

    parse: Callable[[str, object], Parsed]
    looks_like: Callable[[object], bool]
    shape: str
    extras: tuple[str, ...] = ()


def _parse_plain(record_id: str, value: object) -> Parsed:
    record = _object(value, record_id)
    return {
        "prompt_id": _own_id(record, record_id, "prompt_id", "id"),
        "prompt": _prompt(record, record_id, "prompt"),
        "reference": _optional(record, record_id, "reference"),
    }


def _parse_mt_bench(record_id: str, value: object) -> Parsed:
    """Only the first turn: later turns presuppose the model's own first answer."""
    record = _object(value, record_id)
    return {
        "prompt_id": _own_id(record, record_id, "question_id"),
        "prompt": _prompt(record, record_id, "turns", 0),
        "category": _optional(record, record_id, "category"),
        "reference": _optional(record, record_id, "reference", 0),
    }


def _parse_arena_hard(record_id: str, value: object) -> Parsed:
    """v0.1 as released (``uid`` + ``prompt``) and its earlier FastChat-style ``turns`` shape."""
    record = _object(value, record_id)
    path: FieldPath = ("turns", 0, "content") if "turns" in record else ("prompt",)
    return {
        "prompt_id": _own_id(record, record_id, "uid", "question_id"),
        "prompt": _prompt(record, record_id, *path),
    }


def _parse_alpaca(record_id: str, value: object) -> Parsed:
    record = _object(value, record_id)
    extra = _optional(record, record_id, "input")
    return {
        "prompt_id": _own_id(record, record_id, "id"),
        "prompt": _prompt(record, record_id, "instruction", extra=extra),
    }


def _parse_alpaca_eval(record_id: str, value: object) -> Parsed:
    """Keep ``dataset`` so callers can drop prompts drawn from the private set's source."""
    record = _object(value, record_id)
    return {
        "prompt_id": record_id,
        "prompt": _prompt(record, record_id, "instruction"),
        "dataset": _optional(record, record_id, "dataset"),
    }


def _parse_self_instruct(record_id: str, value: object) -> Parsed:
    record = _object(value, record_id)
    extra = _optional(record, record_id, "instances", 0, "input")
    return {
        "prompt_id": _own_id(record, record_id, "id"),
        "prompt": _prompt(record, record_id, "instruction", extra=extra),
    }


def _parse_text(record_id: str, value: object) -> Parsed:
    """Read a bare JSON string per line, as in the OASST prompt lists."""
    prompt = as_text(value, record_id, "<record>")
    if not prompt.strip():
        raise RecordError(record_id, "<record>", "empty_prompt")
    return {"prompt_id": record_id, "prompt": prompt}


def _parse_xsum(record_id: str, value: object) -> Parsed:
    """Use the full document as the prompt; callers wrap it in their summarisation template."""
    record = _object(value, record_id)
    return {
        "prompt_id": _own_id(record, record_id, "id"),
        "prompt": _prompt(record, record_id, "Document-Full"),
        "reference": _optional(record, record_id, "Reference"),
    }


_INSTRUCTION_MARKERS = ("dataset", "instances", "prompt")

PROMPT_FORMATS: dict[str, PromptFormat] = {
    "plain": PromptFormat(
        _parse_plain,
        lambda v: (
            _is_dict_with(v, "prompt") and not any(k in v for k in ("uid", "turns", "instruction"))
        ),
        "{'prompt': string, optional 'prompt_id'/'id', 'reference'} (also Koala)",
        ("reference",),
    ),
    "mt-bench": PromptFormat(
        _parse_mt_bench,
        lambda v: _first_turn_is(v, str),
        "{'question_id', 'turns': [string, ...]} (MT-Bench, Vicuna-80)",
        ("category", "reference"),
    ),
    "arena-hard": PromptFormat(
        _parse_arena_hard,
        lambda v: _is_dict_with(v, "uid", "prompt") or _first_turn_is(v, dict),
        "{'uid', 'prompt': string} or {'question_id', 'turns': [{'content': string}]}",
    ),
    "alpaca": PromptFormat(
        _parse_alpaca,
        lambda v: _is_dict_with(v, "instruction") and not any(k in v for k in _INSTRUCTION_MARKERS),
        "{'instruction': string, optional 'input': string}",
    ),
    "alpaca-eval": PromptFormat(
        _parse_alpaca_eval,
        lambda v: _is_dict_with(v, "instruction", "dataset") and "instances" not in v,
        "{'instruction', 'dataset', ...} (AlpacaEval model_outputs.json)",
        ("dataset",),
    ),
    "self-instruct": PromptFormat(
        _parse_self_instruct,
        lambda v: _is_dict_with(v, "instruction", "instances") and "dataset" not in v,
        "{'instruction', 'instances': [{'input': string, ...}]}",
    ),
    "oasst": PromptFormat(
        _parse_text,
        lambda v: isinstance(v, str),
        "a JSON string per line (OASST prompt lists)",
    ),
    "xsum": PromptFormat(
        _parse_xsum,
        lambda v: _is_dict_with(v, "Document-Full"),
        "an XSum human-evaluation archive (.tar.gz)",
        ("reference",),
    ),
}
"""Format name -> :class:`PromptFormat`; parsing and detection both read this one dict."""

FORMATS: tuple[str, ...] = ("auto", *PROMPT_FORMATS)


# --- XSum archive -------------------------------------------------------------------------------

XSUM_SECTIONS: tuple[str, ...] = (
    "Document-400",
    "Document-Full",
    "LEAD",
    "Ext-Oracle",
    "Pointer-Generator",
    "ConvS2S",
    "Topic-ConvS2S",
    "Reference",
    "Questions-Answers",
)
"""Section headers of ``xsum-human-evaluation-data.txt``; each runs to the next header."""
XSUM_SUMMARIES: tuple[str, ...] = XSUM_SECTIONS[2:8]
"""The five system summaries and the human reference: the candidates an XSum pool offers."""

_XSUM_DOCUMENT = re.compile(r"^==(\S+)==$", re.MULTILINE)
ARCHIVE_SUFFIXES: tuple[str, ...] = (".tar.gz", ".tgz", ".tar")


def _xsum_sections(block: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    lines: list[str] | None = None
    for line in block.splitlines():
        if line.strip() in XSUM_SECTIONS:
            lines = sections.setdefault(line.strip(), [])
        elif lines is not None:
            lines.append(line)
    return {name: "\n".join(body).strip() for name, body in sections.items()}


def read_xsum_archive(path: str | os.PathLike[str]) -> list[Raw]:
    """Documents of the XSum human-evaluation archive, one record per ``==<bbc id>==`` block.

    The archive holds one text file in which each document starts with ``==<bbc id>==`` and is
    followed by header lines (:data:`XSUM_SECTIONS`) each introducing a section. A record maps
    section names to their text plus ``id`` (the BBC id); its record id is
    ``"<member>:<0-based document index>"``.
    """
    path = Path(path)
    records: list[Raw] = []
    try:
        with tarfile.open(path) as archive:
            for member in archive.getmembers():
                handle = archive.extractfile(member) if member.isfile() else None
                if handle is None:
                    continue
                text = handle.read().decode("utf-8", errors="surrogateescape")
                parts = _XSUM_DOCUMENT.split(text)[1:]  # [id, block, id, block, ...]
                name = Path(member.name).name
                for index, (bbc_id, block) in enumerate(zip(parts[::2], parts[1::2], strict=True)):
                    value = {"id": bbc_id, **_xsum_sections(block)}
                    records.append(Raw(f"{name}:{index}", value))
    except (tarfile.TarError, OSError, EOFError):
        raise DataError(str(path), WHOLE_FILE, "not a readable tar archive") from None
    return records


# --- loading ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PromptSet:
    """Public prompts from one source, deduplicated, in the table layout synthesis reads.

    Parameters
    ----------
    table : polars.DataFrame
        String columns ``prompt_id`` (the dataset's own id, else ``"<file>:<index>"``; unique
        within the source), ``prompt``, ``source``, then the format's ``extras`` (nullable):
        ``reference``, ``category`` or ``dataset``.
    dropped : dict of str to int
        Records dropped, by reason: :data:`~dpprefsyn.loaders.records.REASONS` kinds (only with
        ``on_error="drop"``) and ``"duplicate"`` (always: an exact repeat of a kept prompt).
    format : str
        The format the source was parsed as (resolved when ``"auto"`` was asked).
    """

    table: pl.DataFrame
    dropped: dict[str, int]
    format: str

    def __post_init__(self) -> None:
        """Check the core columns and sort ``dropped`` so equal sets compare and print alike."""
        if tuple(self.table.columns[:3]) != CORE_COLUMNS:
            raise ValueError(f"table must start with {CORE_COLUMNS}, got {self.table.columns}")
        object.__setattr__(self, "dropped", dict(sorted(self.dropped.items())))

    def __len__(self) -> int:
        """Return the number of prompts."""
        return self.table.height

    @property
    def prompts(self) -> list[str]:
        """The prompt texts in table order, as candidate backends take them."""
        return self.table["prompt"].to_list()


def _source_label(source: str | os.PathLike[str]) -> str:
    """Parent folder and name of a path (``mt-bench/question.jsonl``), else the hub name."""
    path = Path(source)
    if path.exists():
        return f"{path.parent.name}/{path.name}" if path.parent.name else path.name
    return os.fspath(source)


def _read(source: str | os.PathLike[str], split: str | None) -> list[Raw]:
    if Path(source).is_file() and Path(source).name.lower().endswith(ARCHIVE_SUFFIXES):
        return read_xsum_archive(source)
    return read_source(source, split=split)


def _shape(value: object) -> str:
    if not isinstance(value, dict):
        return json_type(value)
    return "{" + ", ".join(f"{k!r}: {json_type(v)}" for k, v in sorted(value.items())) + "}"


def detect_prompt_format(raws: list[Raw], source: str) -> str:
    """Name the format most of the first decodable records look like.

    Raises
    ------
    DataError
        When no format wins outright; the message lists the field names and value types of the
        first records and what each format expects.
    """
    sample = list(islice((raw.value for raw in raws if raw.error is None), SAMPLE_SIZE))
    votes = Counter(
        name for value in sample for name, spec in PROMPT_FORMATS.items() if spec.looks_like(value)
    )
    ranked = votes.most_common(2)
    if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
        return ranked[0][0]
    seen = "; ".join(dict.fromkeys(_shape(value) for value in sample[:3])) or "no records"
    expected = "; ".join(f"{name}: {spec.shape}" for name, spec in PROMPT_FORMATS.items())
    raise DataError(
        source,
        WHOLE_FILE,
        f"cannot tell the prompt format from the first records (votes {dict(votes)}); they look "
        f"like {seen}. Known formats: {expected}. Pass format= (and columns=) explicitly",
    )


def _check_options(
    format: str, on_error: str, columns: Mapping[str, str], limit: int | None
) -> None:
    check_load_options(format, FORMATS, on_error, columns, MAPPABLE_COLUMNS)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")


def load_prompts(
    source: str | os.PathLike[str],
    *,
    format: str = "auto",
    columns: Mapping[str, str] | None = None,
    split: str | None = None,
    limit: int | None = None,
    on_error: str = "raise",
) -> PromptSet:
    """Load public prompts from a file, an XSum archive, a saved dataset or a hub dataset.

    Parameters
    ----------
    source : str or os.PathLike
        A ``.jsonl``/``.json``/``.parquet``/``.csv`` file (optionally ``.gz``), the XSum
        human-evaluation ``.tar.gz``, a ``save_to_disk`` directory, or a Hugging Face hub name
        (used when no such path exists; loaded with ``datasets.load_dataset``).
    format : str, default="auto"
        One of :data:`FORMATS`; ``"auto"`` lets the first records vote.
    columns : mapping of str to str or None, default=None
        Canonical name (``prompt``, ``prompt_id``, ``reference``) -> source column, e.g.
        ``{"prompt": "question"}``. Errors name the source column.
    split : str or None, default=None
        Split of a hub dataset or a saved ``DatasetDict``; ``None`` means ``"train"``.
    limit : int or None, default=None
        Keep the first ``limit`` usable prompts; later records are not read or checked.
    on_error : {"raise", "drop"}, default="raise"
        ``"raise"`` stops at the first bad record (empty or non-string prompt, missing field,
        broken JSON) with a :class:`~dpprefsyn.errors.DataError`; ``"drop"`` skips and counts it.

    Returns
    -------
    PromptSet
        At least one prompt; exact duplicates of an earlier prompt are dropped and counted under
        ``"duplicate"`` so no prompt is answered (and scored) twice.

    Raises
    ------
    DataError
        A bad record (with ``on_error="raise"``), or an unusable source: no records, no format
        recognised, unreadable container, or nothing left after dropping.
    FileNotFoundError
        ``source`` is neither an existing path nor a loadable hub dataset.

    Examples
    --------
    >>> prompts = load_prompts("../shared/data/mt-bench/question.jsonl")  # doctest: +SKIP
    >>> len(prompts), prompts.format  # doctest: +SKIP
    (80, 'mt-bench')
    """
    columns = dict(columns or {})
    _check_options(format, on_error, columns, limit)
    label = _source_label(source)
    raws = _read(source, split)
    if not raws:
        raise DataError(label, WHOLE_FILE, "source holds no records")
    if columns:
        raws = [raw._replace(value=rename_fields(raw.value, columns)) for raw in raws]
    resolved = detect_prompt_format(raws, label) if format == "auto" else format
    spec = PROMPT_FORMATS[resolved]

    rows: list[Parsed] = []
    seen: set[str] = set()
    dropped: Counter[str] = Counter()
    for raw in raws:
        if limit is not None and len(rows) == limit:
            break
        try:
            if raw.error is not None:
                raise raw.error
            parsed = spec.parse(raw.record_id, raw.value)
        except RecordError as err:
            if on_error == "raise":
                raise err.renamed(columns) from None
            dropped[err.kind] += 1
            continue
        if parsed["prompt"] in seen:
            dropped["duplicate"] += 1
            continue
        seen.add(parsed["prompt"])  # type: ignore[arg-type]
        rows.append(parsed)
    if not rows:
        raise DataError(label, WHOLE_FILE, f"no usable prompt; dropped {dict(dropped)}")
    schema = {name: pl.String() for name in (*CORE_COLUMNS, *spec.extras)}
    table = pl.DataFrame(
        [{**row, "source": label} for row in rows], schema=schema, orient="row"
    ).select(list(schema))
    return PromptSet(table=table, dropped=dict(dropped), format=resolved)
