"""Best-of-N with the private reward: rank public candidates, spend no further budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import polars as pl

from dpprefsyn.artifact import PreferenceModel

Scoring = Literal["mixture", "mean", "routed", "cluster"]


def reward_scores(
    model: PreferenceModel,
    embeddings: np.ndarray,
    *,
    scoring: Scoring = "mixture",
    cluster: int | None = None,
    prompt_embeddings: np.ndarray | None = None,
) -> np.ndarray:
    """One reward per embedded candidate.

    ``mixture`` weights clusters by their noisy probabilities, ``mean`` averages the kept
    clusters (the method's PPO reward), ``cluster`` uses one cluster, ``routed`` uses the
    cluster each candidate's prompt is routed to (``prompt_embeddings`` aligned with
    ``embeddings``). All are post-processing of the DP model.
    """
    if scoring == "mixture":
        return model.mixture_reward(embeddings)
    if scoring == "mean":
        return model.mean_reward(embeddings)
    scores = model.scores(embeddings)
    if scoring == "cluster":
        if cluster is None or not 0 <= cluster < model.n_clusters:
            raise ValueError(f"scoring='cluster' needs a cluster in [0, {model.n_clusters})")
        return scores[:, cluster]
    if prompt_embeddings is None:
        raise ValueError("scoring='routed' needs the prompts' embeddings")
    return scores[np.arange(len(scores)), model.route(prompt_embeddings)]


def best_of_n(
    prompts: Sequence[str],
    candidates: Sequence[Sequence[tuple[str, str]]],
    scores: Sequence[np.ndarray],
) -> pl.DataFrame:
    """The top-scored candidate of each prompt, with its score and runner-up margin."""
    rows = []
    for prompt, cands, s in zip(prompts, candidates, scores, strict=True):
        if not cands:
            continue
        order = np.argsort(-np.asarray(s))
        best = int(order[0])
        margin = float(s[best] - s[order[1]]) if len(order) > 1 else float("nan")
        rows.append((prompt, cands[best][0], cands[best][1], float(s[best]), margin, len(cands)))
    schema = ["prompt", "response", "generator", "reward", "margin", "n_candidates"]
    return pl.DataFrame(rows, schema=schema, orient="row")
