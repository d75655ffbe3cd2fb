"""Public candidate pools: many responses to the same public prompts (no private data).

Read here only to fit a free projection; the synthesis stage has its own loaders.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpprefsyn.errors import DataError
from dpprefsyn.loaders.readers import WHOLE_FILE, read_source
from dpprefsyn.loaders.records import WHOLE_RECORD, RecordError, as_text, json_type

log = logging.getLogger(__name__)

PROMPT_KEYS = ("prompt", "instruction", "question", "input")
RESPONSE_KEYS = ("response", "output", "answer", "completion")


def _first_text(record: dict, keys: tuple[str, ...], record_id: str, role: str) -> str:
    """The first of ``keys`` that holds text; errors name the record and the field."""
    for key in keys:
        if isinstance(record.get(key), str):
            return as_text(record[key], record_id, key)
    present = next((key for key in keys if key in record), None)
    if present is not None:
        raise RecordError(record_id, present, "not_a_string", f"got {json_type(record[present])}")
    raise RecordError(record_id, role, "missing_field", f"expected one of {', '.join(keys)}")


def read_candidate_pool(paths: Sequence[str | Path]) -> tuple[list[str], list[str]]:
    """Read ``(prompts, responses)`` from JSON/JSONL files of prompt/response records.

    Several files (for example one per model) are merged; records are matched by prompt text.
    Files are read by the loaders' readers, so a bad file fails as a bad private one does: a
    :class:`~dpprefsyn.errors.DataError` naming the record and field. Blank responses are left
    out and counted in a log line.
    """
    prompts: list[str] = []
    responses: list[str] = []
    blank = 0
    for path in paths:
        path = Path(path)
        if not path.is_file():  # read_source would try the hub for a mistyped path
            raise FileNotFoundError(f"no such candidate file: {str(path)!r}")
        raws = read_source(path)
        if not raws:
            raise DataError(str(path), WHOLE_FILE, "source holds no records")
        for raw in raws:
            if raw.error is not None:
                raise raw.error
            if not isinstance(raw.value, dict):
                raise RecordError(raw.record_id, WHOLE_RECORD, "not_an_object")
            p = _first_text(raw.value, PROMPT_KEYS, raw.record_id, "prompt")
            r = _first_text(raw.value, RESPONSE_KEYS, raw.record_id, "response")
            if not p.strip():
                raise RecordError(raw.record_id, "prompt", "empty_prompt")
            if r.strip():
                prompts.append(p)
                responses.append(r)
            else:
                blank += 1
    if blank:
        log.warning("public pool: left out %d blank response(s)", blank)
    return prompts, responses


def pool_differences(
    embeddings: np.ndarray, prompts: Sequence[str], *, max_pairs_per_prompt: int = 10
) -> np.ndarray:
    """Within-prompt differences of candidate embeddings (at most ``max_pairs_per_prompt``)."""
    embeddings = np.asarray(embeddings, dtype=np.float64)
    by_prompt: dict[str, list[int]] = {}
    for i, p in enumerate(prompts):
        by_prompt.setdefault(p, []).append(i)
    out = []
    for idx in by_prompt.values():
        if len(idx) < 2:
            continue
        i, j = np.triu_indices(len(idx), k=1)
        pairs = np.stack([np.asarray(idx)[i], np.asarray(idx)[j]], axis=1)[:max_pairs_per_prompt]
        out.append(embeddings[pairs[:, 0]] - embeddings[pairs[:, 1]])
    if not out:
        raise DataError(
            "public candidate pool",
            WHOLE_FILE,
            "no prompt has two or more distinct responses, so there is no difference to fit a "
            "projection on",
        )
    return np.concatenate(out)
