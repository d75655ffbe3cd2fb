"""Wall time and peak memory of the private fit after embedding, on synthetic vectors.

Usage::

    python -m benchmarks.fit_speed [--n 160000] [--dim 384] [--json PATH]

Runs each configuration in a fresh process so peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CONFIGS = {
    "default (public PCA, K=1, DP Newton)": {},
    "DP-PCA, K=5 spherical, DP Newton": {"projection": "dp-pca", "clustering": "spherical"},
    "DP-PCA, K=5 spherical, DP-SGD": {
        "projection": "dp-pca",
        "clustering": "spherical",
        "reward": "dp-sgd",
    },
    "paper (DP-PCA, diffprivlib K=5, DP-SGD)": "paper",
}


def one(n: int, dim: int, overrides) -> dict:
    from dpprefsyn.private import FitConfig, fit_from_embeddings

    rng = np.random.default_rng(0)
    ch = rng.normal(size=(n, dim)).astype(np.float32)
    rj = rng.normal(size=(n, dim)).astype(np.float32)
    pub = rng.normal(size=(2000, dim))
    kw = dict(epsilon=2.0, insecure_seed=0)
    cfg = FitConfig.paper(**kw) if overrides == "paper" else FitConfig(**kw, **overrides)
    t = time.perf_counter()
    fit_from_embeddings(ch, rj, cfg, public_differences=pub)
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    return {"seconds": seconds, "peak_rss_gib": peak}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=160_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(one(args.n, args.dim, CONFIGS[args.child])))
        return
    results = {}
    print(f"| configuration (n={args.n}, d={args.dim}) | seconds | peak RSS GiB |")
    print("|---|---|---|")
    for label in CONFIGS:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--n",
                str(args.n),
                "--dim",
                str(args.dim),
                "--child",
                label,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        res = json.loads(out.stdout.strip().splitlines()[-1])
        results[label] = res
        print(f"| {label} | {res['seconds']:.1f} | {res['peak_rss_gib']:.2f} |", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
