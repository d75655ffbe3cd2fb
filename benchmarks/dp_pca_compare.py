"""DP-PCA: our Gaussian second-moment mechanism against diffprivlib's and OpenDP's PCA.

Usage::

    python -m benchmarks.dp_pca_compare [--n 20000] [--dims 32 384] [--timeout 300] [--json PATH]

Same unit-norm rows (a planted 20-dimensional preference subspace plus noise), same epsilon
(delta 1e-5 where the mechanism needs one), 20 components. Reported: wall time (each library in
its own process with a time limit) and captured energy ``||X V||^2 / ||X V*||^2`` where ``V*``
are the non-private top components (1 = as good as non-private).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

K = 20


def make(n: int, d: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(d, K)))[0]
    X = rng.normal(size=(n, K)) * np.linspace(3, 1, K) @ basis.T + 0.5 * rng.normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def fit(lib: str, X: np.ndarray, epsilon: float) -> np.ndarray:
    if lib == "ours":
        from dpprefsyn.dp import DPPCA

        return (
            DPPCA(K, epsilon=epsilon, delta=1e-5, row_norm_bound=1.0, random_state=0)
            .fit(X)
            .components_
        )
    if lib == "diffprivlib":
        from diffprivlib.models import PCA

        m = PCA(K, epsilon=epsilon, data_norm=1.0, centered=True, random_state=0)
        return m.fit(X).components_
    import opendp.prelude as dp

    dp.enable_features("contrib", "honest-but-curious", "floating-point")
    from opendp.extras.sklearn.decomposition import PCA

    m = PCA(epsilon=epsilon, row_norm=1.0, n_samples=len(X), n_features=X.shape[1], n_components=K)
    return m.fit(X).components_


def child(lib: str, n: int, d: int, epsilon: float) -> dict:
    X = make(n, d)
    fit(lib, X[: 4 * d], epsilon)  # imports and one-time setup stay out of the timing
    t = time.perf_counter()
    V = fit(lib, X, epsilon)
    seconds = time.perf_counter() - t
    _, _, vt = np.linalg.svd(X, full_matrices=False)
    best = np.linalg.norm(X @ vt[:K].T) ** 2
    return {"seconds": seconds, "captured_energy": float(np.linalg.norm(X @ V.T) ** 2 / best)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--dims", nargs="+", type=int, default=[32, 384])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        lib, d = args.child
        print(json.dumps(child(lib, args.n, int(d), args.epsilon)))
        return
    results = {}
    print(f"| d (n={args.n}, eps={args.epsilon}) | library | seconds | captured energy |")
    print("|---|---|---|---|")
    for d in args.dims:
        for lib in ("ours", "opendp", "diffprivlib"):
            cmd = [sys.executable, "-m", "benchmarks.dp_pca_compare", "--n", str(args.n)]
            cmd += ["--epsilon", str(args.epsilon), "--child", lib, str(d)]
            try:
                out = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=args.timeout, check=True
                )
                res = json.loads(out.stdout.strip().splitlines()[-1])
                cell = f"{res['seconds']:.2f} | {res['captured_energy']:.3f}"
            except subprocess.TimeoutExpired:
                res = {"timeout_s": args.timeout}
                cell = f"> {args.timeout:.0f} (killed) | -"
            except subprocess.CalledProcessError as err:
                res = {"error": err.stderr.strip().splitlines()[-1][:200]}
                cell = f"error: {res['error']} | -"
            results[f"{lib}@{d}"] = res
            print(f"| {d} | {lib} | {cell} |", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
