"""Does the private reward pick the answer human judges prefer? MT-Bench human judgments.

Usage::

    python -m benchmarks.rerank_mtbench [--epsilons 2 8] [--seeds 5] [--json PATH]

A preference model is fitted on a private set (PandaLM or HH harmless, all of it; projection
from the public AlpacaEval pool), then asked to rerank each pair of MT-Bench answers that
expert judges compared (LLMBar's 200 human-judgment pairs, ties removed). Reported: how often
the reward's pick is the judges' pick, against 0.5 for a random pick (a one-sided binomial
test), mean over seeds of the DP noise.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from benchmarks._data import SHARED, embedder, private_pairs, public_pool
from dpprefsyn.private import FitConfig, fit_from_embeddings
from dpprefsyn.rerank import reward_scores
from dpprefsyn.templates import get_template


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--private", nargs="+", default=["pandalm", "hh-harmless"])
    ap.add_argument("--epsilons", nargs="+", type=float, default=[2.0, 8.0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    emb = embedder()
    pool = public_pool(emb)
    pairs = json.loads((SHARED / "llmbar/Dataset/Processed/MT-Bench/dataset.json").read_text())
    tpl = get_template("dialogue")
    prompts = [p["input"] for p in pairs]
    e1 = emb.encode_pairs(prompts, [p["output_1"] for p in pairs], tpl)
    e2 = emb.encode_pairs(prompts, [p["output_2"] for p in pairs], tpl)
    human_first = np.array([p["label"] == 1 for p in pairs])
    results = {}
    print("| private set | epsilon | agreement with judges | one-sided p vs 0.5 |")
    print("|---|---|---|---|")
    for name in args.private:
        _, px, ch, rj = private_pairs(name, emb)
        for eps in args.epsilons:
            rates = []
            for seed in range(args.seeds):
                cfg = FitConfig(epsilon=eps, insecure_seed=seed)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = fit_from_embeddings(ch, rj, cfg, public_differences=pool, prompts=px)
                s1, s2 = reward_scores(model, e1), reward_scores(model, e2)
                picks_first = s1 > s2
                rates.append(float(np.mean(picks_first == human_first)))
            rate = float(np.mean(rates))
            p = binomtest(int(round(rate * len(pairs))), len(pairs), 0.5, "greater").pvalue
            results[f"{name}@{eps}"] = {"agreement": rate, "sd": float(np.std(rates)), "p": p}
            print(f"| {name} | {eps} | {rate:.3f} ± {np.std(rates):.3f} | {p:.3g} |", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
