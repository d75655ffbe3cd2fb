"""Public candidate pools: many responses to the same public prompts (no private data).

Read here only to fit a free projection; the synthesis stage has its own loaders.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

PROMPT_KEYS = ("prompt", "instruction", "question", "input")
RESPONSE_KEYS = ("response", "output", "answer", "completion")


def read_candidate_pool(paths: Sequence[str | Path]) -> tuple[list[str], list[str]]:
    """Read ``(prompts, responses)`` from JSON/JSONL files of prompt/response records.

    Several files (for example one per model) are merged; records are matched by prompt text.
    """
    prompts: list[str] = []
    responses: list[str] = []
    for path in paths:
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            records = json.loads(text)
        for i, rec in enumerate(records):
            p = next((rec[k] for k in PROMPT_KEYS if isinstance(rec.get(k), str)), None)
            r = next((rec[k] for k in RESPONSE_KEYS if isinstance(rec.get(k), str)), None)
            if p is None or r is None:
                raise ValueError(
                    f"record {path.name}:{i}: needs a prompt field {PROMPT_KEYS} and a response "
                    f"field {RESPONSE_KEYS}"
                )
            if r.strip():
                prompts.append(p)
                responses.append(r)
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
        raise ValueError("the public pool has no prompt with two or more responses")
    return np.concatenate(out)
