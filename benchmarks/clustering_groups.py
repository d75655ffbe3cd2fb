"""Does clustering help? Synthetic preference groups with known reward directions.

Usage::

    python benchmarks/clustering_groups.py [--seeds 5] [--epsilon 4] [--json PATH]

Users fall into groups with their own Bradley-Terry direction in embedding space (known
proportions). Three worlds: *distinct* groups (orthogonal directions), *conflicting* groups
(one group's direction is the other's negation), and conflicting groups whose users ask about
different topics (the group shows in the prompt embedding, never in the label). For each
configuration we report the label-blind accuracy on held-out pairs of the whole population,
and group recovery: for each true group, the best cosine between a kept cluster's reward
direction and the group's direction (1 = recovered), averaged with the group proportions.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np

from dpprefsyn.evaluation import label_blind_accuracy
from dpprefsyn.private import FitConfig, fit_from_embeddings

CONFIGS = {
    "K=1 (default)": dict(projection="none"),
    "K=3 signed spherical k-means": dict(
        projection="none", clustering="spherical", n_clusters=3, sign_invariant=False
    ),
    "K=3 sign-invariant spherical k-means": dict(
        projection="none", clustering="spherical", n_clusters=3, sign_invariant=True
    ),
    "K=3 diffprivlib k-means (paper)": dict(
        projection="none", clustering="diffprivlib", n_clusters=3
    ),
    "K=3 prompt clusters, routed by prompt": dict(
        projection="none", clustering="spherical", n_clusters=3, cluster_on="prompt"
    ),
}
WORLDS = ("distinct", "conflicting", "conflicting, topic-tied")


def make_world(kind: str, n: int, d: int, rng: np.random.Generator):
    """Pairs of random responses labelled by their user's group direction (BT, scale 4)."""
    dirs = np.linalg.qr(rng.normal(size=(d, 3)))[0].T
    if kind.startswith("conflicting"):
        dirs = np.stack([dirs[0], -dirs[0], dirs[1]])
    props = np.array([0.5, 0.3, 0.2])
    g = rng.choice(3, size=n, p=props)
    topics = np.linalg.qr(rng.normal(size=(d, 3)))[0].T
    # Prompts: a topic centre plus noise when topic-tied, pure noise otherwise.
    tied = kind.endswith("topic-tied")
    prompts = (2.0 * topics[g] if tied else 0.0) + rng.normal(size=(n, d)) / np.sqrt(d)
    a, b = rng.normal(size=(n, d)) / np.sqrt(d), rng.normal(size=(n, d)) / np.sqrt(d)
    margin = 4 * np.sqrt(d) * ((a - b) * dirs[g]).sum(1)
    a_wins = rng.random(n) < 1 / (1 + np.exp(-margin))
    ch = np.where(a_wins[:, None], a, b)
    rj = np.where(a_wins[:, None], b, a)
    return ch, rj, prompts, dirs, props


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--n", type=int, default=6000)
    ap.add_argument("--dim", type=int, default=20)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results: dict = {}
    for world in WORLDS:
        for label, overrides in CONFIGS.items():
            accs, recs = [], []
            for seed in range(args.seeds):
                rng = np.random.default_rng(seed)
                ch, rj, x, dirs, props = make_world(world, args.n, args.dim, rng)
                tr = np.arange(args.n) < int(0.8 * args.n)
                cfg = FitConfig(epsilon=args.epsilon, delta=1e-5, insecure_seed=seed, **overrides)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = fit_from_embeddings(ch[tr], rj[tr], cfg, prompts=x[tr])
                accs.append(label_blind_accuracy(m, ch[~tr], rj[~tr], prompts=x[~tr]).accuracy)
                w = m.reward_directions[m.kept_clusters]
                w = w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), 1e-12)
                recs.append(float(props @ (dirs @ w.T).max(axis=1)))
            results.setdefault(world, {})[label] = {
                "label_blind_accuracy": [float(np.mean(accs)), float(np.std(accs))],
                "group_recovery": [float(np.mean(recs)), float(np.std(recs))],
            }
    print(f"| world | configuration (eps={args.epsilon}) | label-blind accuracy | group recovery |")
    print("|---|---|---|---|")
    for world, rows in results.items():
        for label, r in rows.items():
            a, s = r["label_blind_accuracy"]
            ga, gs = r["group_recovery"]
            print(f"| {world} | {label} | {a:.3f} ± {s:.3f} | {ga:.3f} ± {gs:.3f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
