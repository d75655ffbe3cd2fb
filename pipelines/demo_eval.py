"""Measure the demo's synthetic pairs against the simulated users' known tastes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from pipelines.make_demo_data import GROUPS, utility


def _style(generator: str, axes: list[str]) -> dict[str, int]:
    bits = generator.removeprefix("style-")
    return {a: 1 if b == "1" else -1 for a, b in zip(axes, bits, strict=True)}


def evaluate_demo(pairs_path: Path, generated, truth_path: Path) -> dict:
    """Agreement with the true taste of each prompt's topic, and the synthetic group mix.

    ``agreement``: share of pairs whose chosen answer the prompt's own group prefers (ties one
    half). ``mix_total_variation``: each cluster is mapped to the group whose taste its pairs
    agree with most; the total variation distance between the share of pairs per mapped group
    and the true group shares (0 = the synthetic data carry the groups in their proportions).
    """
    truth = json.loads(Path(truth_path).read_text())
    axes = truth["axes"]
    pairs = pl.read_parquet(pairs_path)
    if len(pairs) == 0:
        return {"agreement": float("nan"), "mix_total_variation": float("nan"), "n_pairs": 0}
    topic = truth["public_prompt_topic"]
    names = list(GROUPS)
    agree_by_group = np.zeros((len(pairs), len(names)))
    own = np.zeros(len(pairs))
    for i, row in enumerate(pairs.iter_rows(named=True)):
        sc, sr = _style(row["generator_chosen"], axes), _style(row["generator_rejected"], axes)
        for j, g in enumerate(names):
            u = utility(g, sc) - utility(g, sr)
            agree_by_group[i, j] = 1.0 if u > 0 else 0.5 if u == 0 else 0.0
        own[i] = agree_by_group[i, names.index(topic[row["prompt_id"]])]
    clusters = pairs["cluster"].to_numpy()
    mix = np.zeros(len(names))
    for k in np.unique(clusters):
        rows = clusters == k
        mix[agree_by_group[rows].mean(axis=0).argmax()] += rows.sum()
    mix /= mix.sum()
    true_mix = np.array([GROUPS[g]["share"] for g in names])
    return {
        "n_pairs": len(pairs),
        "agreement": float(own.mean()),
        "mix_total_variation": float(0.5 * np.abs(mix - true_mix).sum()),
        "synthetic_mix": dict(zip(names, mix.round(3).tolist(), strict=True)),
        "true_mix": dict(zip(names, true_mix.tolist(), strict=True)),
    }
