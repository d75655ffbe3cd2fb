"""Per-step speed and held-out accuracy of our vectorised DP-SGD against opacus.

Usage::

    python benchmarks/dpsgd_speed.py [--n-per-group 2000] [--seeds 5] [--json PATH]

Both trainers get the same synthetic BT problem (one known direction per group), Poisson rate
``batch / n``, step count, noise multiplier, clipping, learning rate and divisor. opacus trains
one ``nn.Linear(p, 1, bias=False)`` per group; ours trains all groups in lockstep. ms/step is
wall time per group-step (one model update), so the two columns compare like with like. The
last row times ours alone on the production shape (160,000 rows, K=5).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from dpprefsyn.dp.sgd import train_linear_bt


def bt_problem(
    n_per_group: int, axes: np.ndarray, rng: np.random.Generator, beta: float = 4.0
) -> tuple[np.ndarray, np.ndarray]:
    """Draw unit pair differences, chosen minus rejected, from a BT model with one axis per group.

    Returns ``z`` of shape (k * n_per_group, p) and each row's group.
    """
    k, p = axes.shape
    groups = np.repeat(np.arange(k), n_per_group)
    x = rng.standard_normal((groups.size, p))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    margin = beta * np.einsum("ij,ij->i", x, axes[groups])
    flip = rng.random(groups.size) >= 1 / (1 + np.exp(-margin))
    return np.where(flip[:, None], -x, x), groups


def accuracy(theta: np.ndarray, z: np.ndarray, groups: np.ndarray) -> float:
    """Share of held-out pairs whose chosen response the group's reward ranks first."""
    return float((np.einsum("ij,ij->i", z, theta[groups]) > 0).mean())


def opacus_fit(
    z: np.ndarray, *, batch: int, epochs: int, sigma: float, clip: float, lr: float, seed: int
) -> tuple[np.ndarray, int]:
    """Train one group's BT reward with opacus; returns (theta, steps taken)."""
    import torch
    from opacus import PrivacyEngine
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    model = nn.Linear(z.shape[1], 1, bias=False)
    nn.init.zeros_(model.weight)
    loader = DataLoader(TensorDataset(torch.from_numpy(z.astype(np.float32))), batch_size=batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # secure-RNG and backward-hook notices
        module, optim, loader = PrivacyEngine().make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=lr),
            data_loader=loader,
            noise_multiplier=sigma,
            max_grad_norm=clip,
        )
        steps = 0
        for _ in range(epochs):
            for (x,) in loader:
                optim.zero_grad()
                nn.functional.softplus(-module(x)).mean().backward()
                optim.step()
                steps += 1
    return model.weight.detach().numpy()[0].astype(np.float64), steps


def ours_fit(
    z: np.ndarray, groups: np.ndarray, k: int, *, batch: int, epochs: int, sigma: float,
    clip: float, lr: float, seed: int,
) -> tuple[np.ndarray, int]:  # fmt: skip
    """Train all groups with our trainer at opacus's rate and step count; (theta, steps)."""
    n = np.bincount(groups, minlength=k)  # synthetic, public sizes
    batches = -(-n // batch)
    rates = 1.0 / batches  # opacus's rate: 1 / batches per epoch
    steps = epochs * batches
    theta = train_linear_bt(
        z, groups, n_groups=k, sample_rates=rates, steps=steps, noise_multiplier=sigma,
        clip=clip, lr=lr, expected_batch_sizes=np.floor(n * rates), rng=np.random.default_rng(seed),
    )  # fmt: skip
    return theta, int(steps.sum())


def main() -> None:
    """Run both trainers over several seeds, then time ours on the full-size problem."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-per-group", type=int, default=2000)
    ap.add_argument("--p", type=int, default=20)
    ap.add_argument("--groups", type=int, default=5)
    ap.add_argument("--batch", type=int, default=4, help="expected batch size per group")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--full-rows", type=int, default=160_000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.seeds < 2:
        ap.error("--seeds must be >= 2 to report a standard deviation")
    # Imported here, outside the timed region, so import cost is not billed to opacus.
    import opacus
    import torch

    k = args.groups
    hp = dict(batch=args.batch, epochs=args.epochs, sigma=args.sigma, clip=args.clip, lr=args.lr)
    data_rng = np.random.default_rng(12345)
    axes = data_rng.standard_normal((k, args.p))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    z, groups = bt_problem(args.n_per_group, axes, data_rng)
    z_test, g_test = bt_problem(2000, axes, data_rng)

    versions = {"torch": torch.__version__, "opacus": opacus.__version__, "numpy": np.__version__}
    env = {"json": None, "torch_threads": torch.get_num_threads()} | versions
    res: dict = {"config": vars(args) | env}
    for name in ("ours", "opacus"):
        seconds, steps, accs = 0.0, 0, []
        for seed in range(args.seeds):
            t = time.perf_counter()
            if name == "ours":
                theta, n_steps = ours_fit(z, groups, k, seed=seed, **hp)
            else:
                fits = [opacus_fit(z[groups == g], seed=seed, **hp) for g in range(k)]
                theta, n_steps = np.stack([f[0] for f in fits]), sum(f[1] for f in fits)
            seconds += time.perf_counter() - t
            steps += n_steps
            accs.append(accuracy(theta, z_test, g_test))
        res[name] = {
            "ms_per_step": 1e3 * seconds / steps,
            "steps_timed": steps,
            "accuracy_mean": float(np.mean(accs)),
            "accuracy_sd": float(np.std(accs, ddof=1)),
        }
    res["speedup"] = res["opacus"]["ms_per_step"] / res["ours"]["ms_per_step"]

    n_full = args.full_rows // k
    z_full, g_full = bt_problem(n_full, axes, data_rng)
    times = []
    for seed in range(3):
        t = time.perf_counter()
        _, full_steps = ours_fit(z_full, g_full, k, seed=seed, **hp)
        times.append(time.perf_counter() - t)
    res["full"] = {
        "rows": int(g_full.size),
        "seconds_median_of_3": float(np.median(times)),
        "steps_per_group": full_steps // k,
        "ms_per_step": 1e3 * float(np.median(times)) / full_steps,
    }

    print(
        f"| trainer (n={args.n_per_group}/group, p={args.p}, K={k}, batch={args.batch}, "
        f"{args.epochs} epochs, sigma={args.sigma}) | ms/step | steps timed | held-out acc |"
    )
    print("|---|---|---|---|")
    for name in ("ours", "opacus"):
        r = res[name]
        print(
            f"| {name} | {r['ms_per_step']:.4f} | {r['steps_timed']} | "
            f"{r['accuracy_mean']:.3f} ± {r['accuracy_sd']:.3f} |"
        )
    f = res["full"]
    print(f"\nspeed-up (opacus / ours, per step): {res['speedup']:.0f}x")
    print(
        f"ours on {f['rows']} rows x {args.p}, K={k}: {f['seconds_median_of_3']:.2f} s "
        f"({f['steps_per_group']} steps/group, {f['ms_per_step']:.4f} ms/step)"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
