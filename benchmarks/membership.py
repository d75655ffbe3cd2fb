"""Membership inference on the released model and synthetic dataset (HH harmless, epsilon 2).

Usage::

    python -m benchmarks.membership [--seeds 5] [--epsilon 2]
        [--json benchmarks/results/membership.json]

Each seed splits the private set in halves by prompt: members (the fit's input) and
non-members (never seen). The default fit runs on the members at ``--epsilon``; the synthetic
dataset is the pipeline's selection over the public AlpacaEval pool (:mod:`benchmarks._data`)
with that model. Attacks (:mod:`dpprefsyn.audit.membership`):

* model: the reward margin of a pair (loss attack);
* dataset: the largest cosine between a pair's preference direction and a synthetic pair's.

Reference rows show that the attacks have power where something leaks: a non-private logistic
regression in the full embedding space on 100 members (it memorises), and a leaky "synthetic"
set that carries the members' own pairs among the synthetic ones. Matching rows at
``--epsilon`` on the same 100 members show the DP fit does not.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from benchmarks._data import embedder, group_split, private_pairs, public_candidates
from dpprefsyn.artifact import PreferenceModel
from dpprefsyn.audit.membership import (
    dataset_similarity_scores,
    dp_advantage_bound,
    membership_auc,
    model_margin_scores,
)
from dpprefsyn.private import FitConfig, fit_from_embeddings
from dpprefsyn.public_pool import pool_differences
from dpprefsyn.synth.select import select_pairs

SMALL = 100


def synthetic_differences(
    model: PreferenceModel, prompts: list[str], embeddings: np.ndarray, seed: int
) -> np.ndarray:
    """``chosen - rejected`` embeddings of the pairs that synthesis keeps on the public pool."""
    by_prompt: dict[str, list[int]] = {}
    for i, p in enumerate(prompts):
        by_prompt.setdefault(p, []).append(i)
    keys = list(by_prompt)
    index = [by_prompt[k] for k in keys]
    selection = select_pairs(
        model,
        [str(i) for i in range(len(keys))],
        keys,
        ["pool"] * len(keys),
        [[(str(j), "pool") for j in idx] for idx in index],
        [embeddings[idx] for idx in index],
        rng=np.random.default_rng(seed),
    )
    chosen = np.array([int(t) for t in selection.pairs["chosen"]])
    rejected = np.array([int(t) for t in selection.pairs["rejected"]])
    return embeddings[chosen] - embeddings[rejected]


def nonprivate_margins(d_train: np.ndarray, *score_sets: np.ndarray) -> list[np.ndarray]:
    """Margins of an almost unregularised logistic regression fitted on ``d_train``."""
    x = np.concatenate([d_train, -d_train])
    y = np.r_[np.ones(len(d_train)), np.zeros(len(d_train))]
    clf = LogisticRegression(fit_intercept=False, C=1e4, max_iter=5000).fit(x, y)
    return [d @ clf.coef_[0] for d in score_sets]


def run(seeds: int, epsilon: float, json_path: Path | None) -> dict:
    emb = embedder()
    t0 = time.time()
    pool_prompts, _, pool_emb = public_candidates(emb)
    pool = pool_differences(pool_emb, pool_prompts)
    prompts, _, ch, rj = private_pairs("hh-harmless", emb)
    print(f"embedded ({time.time() - t0:.0f}s): {len(prompts)} private pairs", flush=True)
    rows: dict[str, list[dict]] = {}

    def add(name: str, members: np.ndarray, non_members: np.ndarray) -> None:
        rows.setdefault(name, []).append(membership_auc(members, non_members).to_dict())

    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        inside, outside = group_split(prompts, seed, test_fraction=0.5)
        d_in, d_out = ch[inside] - rj[inside], ch[outside] - rj[outside]
        small_in = rng.choice(np.flatnonzero(inside), SMALL, replace=False)
        small_out = rng.choice(np.flatnonzero(outside), SMALL, replace=False)
        for label, rows_in, rows_out in (
            ("all members", np.flatnonzero(inside), np.flatnonzero(outside)),
            (f"{SMALL} members", small_in, small_out),
        ):
            cfg = FitConfig(epsilon=epsilon, insecure_seed=seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = fit_from_embeddings(ch[rows_in], rj[rows_in], cfg, public_differences=pool)
            add(
                f"model, eps {epsilon:g}, {label}",
                model_margin_scores(model, ch[rows_in], rj[rows_in]),
                model_margin_scores(model, ch[rows_out], rj[rows_out]),
            )
            synth = synthetic_differences(model, pool_prompts, pool_emb, seed)
            add(
                f"dataset, eps {epsilon:g}, {label}",
                dataset_similarity_scores(ch[rows_in] - rj[rows_in], synth),
                dataset_similarity_scores(ch[rows_out] - rj[rows_out], synth),
            )
        d_small_in, d_small_out = ch[small_in] - rj[small_in], ch[small_out] - rj[small_out]
        add(
            f"reference: model, non-private LR, {SMALL} members",
            *nonprivate_margins(d_small_in, d_small_in, d_small_out),
        )
        leaky = np.concatenate([synth, d_small_in])
        add(
            f"reference: dataset carrying the {SMALL} members' pairs",
            dataset_similarity_scores(d_small_in, leaky),
            dataset_similarity_scores(d_small_out, leaky),
        )
        add("reference: model, non-private LR, all members", *nonprivate_margins(d_in, d_in, d_out))
        print(f"seed {seed} done ({time.time() - t0:.0f}s)", flush=True)

    summary = {
        name: {
            "auc_mean": float(np.mean([r["auc"] for r in runs])),
            "auc_sd": float(np.std([r["auc"] for r in runs])),
            "auc_max_high": float(max(r["auc_high"] for r in runs)),
            "auc_min_low": float(min(r["auc_low"] for r in runs)),
            "advantage_mean": float(np.mean([r["advantage"] for r in runs])),
            "n_members": runs[0]["n_members"],
        }
        for name, runs in rows.items()
    }
    result = {
        "epsilon": epsilon,
        "seeds": seeds,
        "n_pairs": len(prompts),
        "advantage_bound": dp_advantage_bound(epsilon, 1 / len(prompts)),
        "rows": summary,
    }
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2))
    return result


def to_markdown(result: dict) -> str:
    lines = [
        "| release and attack | members | AUC (mean ± sd) | 95% CI range | advantage |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in result["rows"].items():
        lines.append(
            f"| {name} | {r['n_members']} | {r['auc_mean']:.3f} ± {r['auc_sd']:.3f} | "
            f"[{r['auc_min_low']:.3f}, {r['auc_max_high']:.3f}] | {r['advantage_mean']:.3f} |"
        )
    lines.append(
        f"\nDP bound on any attack's advantage at epsilon {result['epsilon']:g}: "
        f"{result['advantage_bound']:.3f}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/membership.json"))
    args = parser.parse_args()
    print(to_markdown(run(args.seeds, args.epsilon, args.json)))


if __name__ == "__main__":
    main()
