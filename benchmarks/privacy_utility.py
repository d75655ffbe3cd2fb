"""Privacy-utility table: label-blind held-out accuracy of DP preference models on real data.

Usage::

    python -m benchmarks.privacy_utility [--datasets hh-harmless oasst pandalm] [--seeds 5]
        [--json benchmarks/results/privacy_utility.json]

Each row is a configuration, each column an epsilon; cells are mean +- sd over seeds of a
prompt-grouped 80/20 split. Accuracy is label-blind (clusters weighted by their noisy
probabilities, ties one half), the way synthesis uses the rewards.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from benchmarks._data import embedder, group_split, private_pairs, public_pool
from dpprefsyn.evaluation import label_blind_accuracy
from dpprefsyn.private import FitConfig, fit_from_embeddings
from dpprefsyn.projection import public_projection

CONFIGS = {
    "default: public PCA-64, K=1, DP Newton": dict(),
    "no projection, K=1, DP Newton": dict(projection="none"),
    "public PCA-20, K=1, DP Newton": dict(reward="dp-newton", n_components=20),
    "public PCA-20, K=5 prompt clusters (routed), DP Newton": dict(
        reward="dp-newton", clustering="spherical", cluster_on="prompt", n_components=20
    ),
    "DP-PCA-20, K=1, DP Newton": dict(reward="dp-newton", projection="dp-pca", n_components=20),
    "public PCA-20, K=1, DP mean": dict(reward="dp-mean", n_components=20),
    "DP mean, no projection (baseline)": dict(reward="dp-mean", projection="none"),
    "DP-PCA-20, K=1, DP mean": dict(reward="dp-mean", projection="dp-pca", n_components=20),
    "public PCA-20, K=5 sign-invariant k-means, DP mean": dict(
        reward="dp-mean", clustering="spherical", n_components=20
    ),
    "public PCA-20, K=5 signed k-means, DP mean": dict(
        reward="dp-mean", clustering="spherical", sign_invariant=False, n_components=20
    ),
    "public PCA-20, K=1, DP-SGD": dict(reward="dp-sgd", n_components=20),
    "paper: DP-PCA, diffprivlib K=5 (+-0.5), DP-SGD": "paper",
}


def nonprivate_accuracy(d_train: np.ndarray, d_test: np.ndarray, proj=None) -> float:
    """Accuracy of an L2 logistic regression on (optionally projected) differences."""
    if proj is not None:
        d_train, d_test = d_train @ proj.T, d_test @ proj.T
    x = np.concatenate([d_train, -d_train])
    y = np.concatenate([np.ones(len(d_train)), np.zeros(len(d_train))])
    clf = LogisticRegression(fit_intercept=False, C=1.0, max_iter=2000).fit(x, y)
    m = d_test @ clf.coef_[0]
    return float(np.mean(np.where(m == 0, 0.5, m > 0)))


def run(datasets, epsilons, seeds, configs, slow_epsilons, json_path=None) -> dict:
    emb = embedder()
    t0 = time.time()
    pool = public_pool(emb)
    print(f"public pool: {len(pool)} differences ({time.time() - t0:.0f}s)", flush=True)
    results = {}
    for name in datasets:
        t0 = time.time()
        prompts, px, ch, rj = private_pairs(name, emb)
        print(f"{name}: {len(prompts)} pairs embedded ({time.time() - t0:.0f}s)", flush=True)
        rows: dict[str, dict[str, list[float]]] = {}
        for seed in range(seeds):
            train, test = group_split(prompts, seed)
            d_tr, d_te = ch[train] - rj[train], ch[test] - rj[test]
            rows.setdefault("non-private LR, full dim (ceiling)", {}).setdefault("inf", []).append(
                nonprivate_accuracy(d_tr, d_te)
            )
            proj = public_projection(pool, 20)
            rows.setdefault("non-private LR, public PCA-20", {}).setdefault("inf", []).append(
                nonprivate_accuracy(d_tr, d_te, proj)
            )
            for label, overrides in configs.items():
                slow = overrides == "paper" or overrides.get("reward") == "dp-sgd"
                for eps in slow_epsilons if slow else epsilons:
                    kw = dict(epsilon=eps, insecure_seed=1000 * seed + int(eps * 10))
                    cfg = (
                        FitConfig.paper(**kw)
                        if overrides == "paper"
                        else FitConfig(**kw, **overrides)
                    )
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = fit_from_embeddings(
                            ch[train], rj[train], cfg, public_differences=pool, prompts=px[train]
                        )
                    acc = label_blind_accuracy(model, ch[test], rj[test], prompts=px[test])
                    acc = acc.accuracy
                    rows.setdefault(label, {}).setdefault(str(eps), []).append(acc)
            print(f"  seed {seed} done ({time.time() - t0:.0f}s)", flush=True)
        results[name] = {
            "n_pairs": int(len(prompts)),
            "rows": {
                label: {e: [float(np.mean(v)), float(np.std(v))] for e, v in cells.items()}
                for label, cells in rows.items()
            },
        }
        if json_path is not None:  # after each dataset, so a long run keeps what it measured
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(results, indent=2))
    return results


def to_markdown(results: dict, epsilons) -> str:
    cols = [str(e) for e in epsilons]
    lines = []
    for name, res in results.items():
        lines += [f"\n**{name}** ({res['n_pairs']} pairs)\n"]
        lines.append(
            "| configuration | " + " | ".join(f"eps={c}" for c in cols) + " | non-private |"
        )
        lines.append("|---" * (len(cols) + 2) + "|")
        for label, cells in res["rows"].items():
            vals = [f"{cells[c][0]:.3f} ± {cells[c][1]:.3f}" if c in cells else "" for c in cols]
            inf = f"{cells['inf'][0]:.3f} ± {cells['inf'][1]:.3f}" if "inf" in cells else ""
            lines.append(f"| {label} | " + " | ".join(vals) + f" | {inf} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["hh-harmless", "oasst", "pandalm"])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[0.5, 1.0, 2.0, 4.0, 8.0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument(
        "--slow-epsilons",
        nargs="+",
        type=float,
        default=[1.0, 2.0, 4.0],
        help="epsilons for the DP-SGD rows (slow: each fit calibrates its noise)",
    )
    ap.add_argument("--configs", nargs="*", default=None, help="subset of row labels")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    configs = {k: v for k, v in CONFIGS.items() if not args.configs or k in args.configs}
    results = run(args.datasets, args.epsilons, args.seeds, configs, args.slow_epsilons, args.json)
    print(to_markdown(results, args.epsilons))


if __name__ == "__main__":
    main()
