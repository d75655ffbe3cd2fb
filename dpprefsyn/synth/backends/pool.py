"""Pre-generated pools: candidates other people already generated for public prompts.

Public leaderboards publish many models' answers to the same prompts (AlpacaEval, MT-Bench,
Arena-Hard, the XSum human evaluation). Sampling from such a pool needs no GPU and gives a
spread of quality that a single model rarely does, which is what picking best and worst needs.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal, NamedTuple, Self

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from dpprefsyn.errors import DataError
from dpprefsyn.loaders.readers import WHOLE_FILE, Raw, read_source
from dpprefsyn.loaders.records import RecordError, as_text
from dpprefsyn.synth.backends.base import Candidate, CandidateBackend, derive_seed
from dpprefsyn.synth.prompts import (
    ARCHIVE_SUFFIXES,
    XSUM_SUMMARIES,
    FieldPath,
    field_name,
    get_field,
    load_prompts,
    read_xsum_archive,
)


class Entry(NamedTuple):
    """One candidate as read: its prompt (text, or id to join), who wrote it and the text."""

    record_id: str
    prompt: str | None
    prompt_id: str | None
    generator: str | None
    text: str | None


def _text(record: object, record_id: str, *path: str | int) -> str | None:
    """Text at ``path``; null is None (an unanswered prompt), anything else not text is an error."""
    value = get_field(record, record_id, *path)
    return None if value is None else as_text(value, record_id, field_name(path))


def _id(record: dict[str, Any], key: str) -> str | None:
    value = record.get(key)
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None


def _alpaca_eval(record_id: str, value: dict[str, Any]) -> list[Entry]:
    prompt = _text(value, record_id, "instruction")
    text = _text(value, record_id, "output")
    return [Entry(record_id, prompt, None, _id(value, "generator"), text)]


def _mt_bench(record_id: str, value: dict[str, Any]) -> list[Entry]:
    """First turn of the first choice, matching the prompt loader's first-turn prompts."""
    text = _text(value, record_id, "choices", 0, "turns", 0)
    prompt_id = _id(value, "question_id")
    if prompt_id is None:
        raise RecordError(record_id, "question_id", "missing_field")
    return [Entry(record_id, None, prompt_id, _id(value, "model_id"), text)]


def _arena_hard(record_id: str, value: dict[str, Any]) -> list[Entry]:
    """Read the question from the first message and the answer (text or ``{"answer"}``) last."""
    messages = value.get("messages")
    last = max(len(messages) - 1, 1) if isinstance(messages, list) else 1
    answer: FieldPath = ("messages", last, "content")
    if isinstance(get_field(value, record_id, *answer), dict):
        answer = (*answer, "answer")
    prompt = _text(value, record_id, "messages", 0, "content")
    text = _text(value, record_id, *answer)
    return [Entry(record_id, prompt, _id(value, "uid"), _id(value, "model"), text)]


def _jsonl(record_id: str, value: dict[str, Any]) -> list[Entry]:
    prompt_id = _id(value, "prompt_id")
    prompt = (
        None
        if prompt_id is not None and "prompt" not in value
        else _text(value, record_id, "prompt")
    )
    text = _text(value, record_id, "response")
    return [Entry(record_id, prompt, prompt_id, _id(value, "generator"), text)]


def _xsum(record_id: str, value: dict[str, Any]) -> list[Entry]:
    """Five system summaries and the human reference of one document, each its own generator."""
    prompt = _text(value, record_id, "Document-Full")
    return [Entry(record_id, prompt, None, name, value.get(name)) for name in XSUM_SUMMARIES]


class PoolFormat(NamedTuple):
    """How to read one kind of candidate file, and how to recognise its records."""

    parse: Callable[[str, Any], list[Entry]]
    looks_like: Callable[[Any], bool]


def _has(*keys: str) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, dict) and all(key in value for key in keys)


POOL_FORMATS: dict[str, PoolFormat] = {
    "alpaca-eval": PoolFormat(_alpaca_eval, _has("instruction", "output")),
    "mt-bench": PoolFormat(_mt_bench, _has("question_id", "choices")),
    "arena-hard": PoolFormat(_arena_hard, _has("uid", "messages")),
    "jsonl": PoolFormat(_jsonl, _has("response")),
    "xsum": PoolFormat(_xsum, _has("Document-Full")),
}
"""Candidate file format -> reader; ``"auto"`` picks the one whose test the first record passes."""


class PoolSource(BaseModel):
    """One file of existing candidates.

    Parameters
    ----------
    path : Path
        AlpacaEval ``model_outputs.json``; MT-Bench ``model_answer/<model>.jsonl``; Arena-Hard
        ``model_answer/<model>.jsonl``; the XSum human-evaluation ``.tar.gz``; or JSON/JSONL
        records with ``response``, ``generator`` and ``prompt`` (or ``prompt_id``).
    format : str, default="auto"
        A key of :data:`POOL_FORMATS`, or ``"auto"``.
    questions : Path or None, default=None
        Prompt file (any :func:`~dpprefsyn.synth.prompts.load_prompts` format) whose
        ``prompt_id`` the answers' ids refer to; required for MT-Bench answers, which carry only
        ``question_id``. When given, ids take precedence over prompt texts in the file.
    generator : str or None, default=None
        Overrides the generator name read from the records.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path
    format: Literal["auto", "alpaca-eval", "mt-bench", "arena-hard", "jsonl", "xsum"] = "auto"
    questions: Path | None = None
    generator: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_path(cls, value: Any) -> Any:
        """Accept a bare path as a source with default settings (handy in YAML)."""
        return {"path": value} if isinstance(value, str | Path) else value


def _sha1(path: Path | None) -> str | None:
    return None if path is None else hashlib.sha1(path.read_bytes()).hexdigest()


class PoolBackend(CandidateBackend):
    """Draw candidates from pre-generated answers, merged across sources by prompt text.

    Parameters
    ----------
    sources : list of PoolSource
        Files to merge; a bare path is accepted for each. Their order fixes the pool order.

    Attributes
    ----------
    dropped_ : dict of str to int
        Candidates left out at :meth:`load`: ``"empty"`` (no or blank text), ``"duplicate"``
        (same text already pooled for that prompt).

    Notes
    -----
    A prompt with more than ``n`` pooled candidates gets a subsample drawn with a generator
    seeded from the run seed and the prompt text, so it does not depend on which other prompts
    share the shard. Prompts match after stripping surrounding whitespace.
    """

    name: ClassVar[str] = "pool"

    sources: list[PoolSource] = Field(min_length=1)

    _pool: dict[str, list[Candidate]] = PrivateAttr(default_factory=dict)
    _dropped: Counter[str] = PrivateAttr(default_factory=Counter)

    def __init__(self, sources: list[Any] | None = None, /, **settings: Any) -> None:
        super().__init__(**settings if sources is None else {"sources": sources, **settings})

    @property
    def dropped_(self) -> dict[str, int]:
        """Counts of candidates left out at load, by reason."""
        return dict(sorted(self._dropped.items()))

    def _entries(self, source: PoolSource) -> list[Entry]:
        path = source.path
        if path.name.lower().endswith(ARCHIVE_SUFFIXES):
            raws: list[Raw] = read_xsum_archive(path)
        else:
            if not path.is_file():  # read_source would try the hub for a mistyped path
                raise FileNotFoundError(f"no such candidate file: {str(path)!r}")
            raws = read_source(path)
        if not raws:
            raise DataError(str(path), WHOLE_FILE, "source holds no records")
        name = source.format
        if name == "auto":
            first = next((raw.value for raw in raws if raw.error is None), None)
            name = next((k for k, spec in POOL_FORMATS.items() if spec.looks_like(first)), "")
            if not name:
                found = sorted(first) if isinstance(first, dict) else type(first).__name__
                raise DataError(
                    str(path), WHOLE_FILE, f"unknown candidate format (first record: {found})"
                )
        entries = []
        for raw in raws:
            if raw.error is not None:
                raise raw.error
            if not isinstance(raw.value, dict):
                raise RecordError(raw.record_id, "<record>", "not_an_object")
            entries.extend(POOL_FORMATS[name].parse(raw.record_id, raw.value))
        return entries

    def _questions(self, path: Path) -> dict[str, str]:
        prompts = load_prompts(path)
        return dict(zip(prompts.table["prompt_id"], prompts.table["prompt"], strict=True))

    def load(self) -> Self:
        """Read every source and build the pool (prompt -> distinct candidates)."""
        pool: dict[str, list[Candidate]] = {}
        seen: dict[str, set[str]] = {}
        dropped: Counter[str] = Counter()
        for source in self.sources:
            questions = self._questions(source.questions) if source.questions else None
            for entry in self._entries(source):
                prompt = entry.prompt
                if questions is not None and entry.prompt_id is not None:
                    if entry.prompt_id not in questions:
                        reason = f"id {entry.prompt_id!r} is not in {source.questions}"
                        raise DataError(entry.record_id, "prompt_id", reason)
                    prompt = questions[entry.prompt_id]
                if prompt is None:
                    reason = (
                        "answers name their prompt by id only; pass the prompt file as questions="
                    )
                    raise DataError(entry.record_id, "questions", reason)
                key, text = prompt.strip(), (entry.text or "").strip()
                if not text:
                    dropped["empty"] += 1
                    continue
                if text in seen.setdefault(key, set()):
                    dropped["duplicate"] += 1
                    continue
                seen[key].add(text)
                generator = source.generator or entry.generator or source.path.stem
                pool.setdefault(key, []).append(Candidate(text=entry.text, generator=generator))
        self._pool, self._dropped = pool, dropped
        self._loaded = True
        return self

    @property
    def prompts_(self) -> list[str]:
        """Pooled prompts, in pool order (after :meth:`load`)."""
        return list(self._pool)

    def _generate(self, prompts: list[str], n: int, seed: int) -> list[list[Candidate]]:
        out = []
        for prompt in prompts:
            candidates = self._pool.get(prompt.strip(), [])
            if len(candidates) > n:
                rng = np.random.default_rng(derive_seed(seed, prompt.strip()))
                keep = np.sort(rng.choice(len(candidates), size=n, replace=False))
                candidates = [candidates[i] for i in keep]
            out.append(list(candidates))
        return out

    def signature(self) -> dict[str, Any]:
        """Name sources by content hash, not path, so a moved file keeps its cache entries."""
        sources = [
            {
                "format": s.format,
                "generator": s.generator,
                "sha1": _sha1(s.path),
                "questions_sha1": _sha1(s.questions),
            }
            for s in self.sources
        ]
        return {"backend": self.name, "sources": sources}
