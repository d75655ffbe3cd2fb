"""Score candidates with the private model and keep the best and worst (post-processing only)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from dpprefsyn.artifact import PreferenceModel

PAIR_COLUMNS = (
    "prompt_id",
    "prompt",
    "chosen",
    "rejected",
    "cluster",
    "score_chosen",
    "score_rejected",
    "score_gap",
    "generator_chosen",
    "generator_rejected",
    "source",
)


@dataclass(frozen=True)
class Selection:
    """Kept pairs and why the others were dropped."""

    pairs: pl.DataFrame
    dropped: dict[str, int]
    gaps: np.ndarray  # score gap of every prompt that reached scoring, kept or not


def select_pairs(
    model: PreferenceModel,
    prompt_ids: Sequence[str],
    prompts: Sequence[str],
    sources: Sequence[str],
    candidates: Sequence[Sequence[tuple[str, str]]],
    candidate_embeddings: Sequence[np.ndarray],
    *,
    min_gap: float = 0.5,
    prompt_embeddings: np.ndarray | None = None,
    rng: np.random.Generator,
) -> Selection:
    """Turn each prompt's candidates into one preference pair.

    Parameters
    ----------
    candidates : per prompt, a list of ``(text, generator)``; the backends have already
        dropped empty and duplicate texts.
    candidate_embeddings : per prompt, ``(len(candidates), d)`` embeddings made with the model's
        own embedder settings.
    min_gap : pairs whose score gap is below it are dropped (and counted).
    prompt_embeddings : needed for a prompt-routed model.
    rng : draws each prompt's cluster from the noisy cluster probabilities.

    Privacy
    -------
    Reads only the model (DP releases) and public data: post-processing, no budget.
    """
    n = len(prompts)
    if not (len(prompt_ids) == len(sources) == len(candidates) == len(candidate_embeddings) == n):
        raise ValueError("prompts, ids, sources, candidates and embeddings must align")
    if model.routing == "prompt":
        if prompt_embeddings is None:
            raise ValueError("this model routes prompts to clusters: pass prompt_embeddings")
        clusters = model.route(prompt_embeddings)
    else:
        clusters = rng.choice(model.n_clusters, size=n, p=model.cluster_weights)
    directions = model.reward_directions
    dropped: Counter[str] = Counter()
    rows, gaps = [], []
    for i in range(n):
        cands = candidates[i]
        if len(cands) < 2:
            dropped["fewer_than_two_candidates"] += 1
            continue
        scores = np.asarray(candidate_embeddings[i], dtype=np.float64) @ directions[clusters[i]]
        best, worst = int(scores.argmax()), int(scores.argmin())
        gap = float(scores[best] - scores[worst])
        gaps.append(gap)
        if gap < min_gap:
            dropped["score_gap_below_threshold"] += 1
            continue
        rows.append(
            (
                prompt_ids[i],
                prompts[i],
                cands[best][0],
                cands[worst][0],
                int(clusters[i]),
                float(scores[best]),
                float(scores[worst]),
                gap,
                cands[best][1],
                cands[worst][1],
                sources[i],
            )
        )
    pairs = pl.DataFrame(rows, schema=list(PAIR_COLUMNS), orient="row")
    return Selection(pairs=pairs, dropped=dict(dropped), gaps=np.asarray(gaps))
