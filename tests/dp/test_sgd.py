"""Tests for the vectorised DP-SGD trainer; opacus is the reference implementation."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy import stats

from dpprefsyn.dp import sgd
from dpprefsyn.dp.sgd import poisson_subsample, train_linear_bt

torch = pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")


def _fit(z: np.ndarray, groups: np.ndarray, seed: int = 0, **kw) -> np.ndarray:
    """Call the trainer with test defaults: one rate, step count and divisor for all groups."""
    k = kw.pop("n_groups", 1)
    args = {
        "n_groups": k,
        "sample_rates": np.full(k, kw.pop("q", 0.1)),
        "steps": np.full(k, kw.pop("t", 20)),
        "noise_multiplier": kw.pop("sigma", 1.0),
        "expected_batch_sizes": np.full(k, kw.pop("b", 4.0)),
        "rng": np.random.default_rng(seed),
    }
    return train_linear_bt(z, groups, **(args | kw))


def _opacus_fit(
    z: np.ndarray,
    *,
    batch_size: int,
    epochs: int,
    sigma: float,
    clip: float,
    lr: float,
    poisson: bool,
    seed: int = 0,
) -> np.ndarray:
    """Train ``nn.Linear(p, 1, bias=False)`` on ``-log sigmoid(theta . z)`` with opacus."""
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    model = nn.Linear(z.shape[1], 1, bias=False).double()
    nn.init.zeros_(model.weight)
    loader = DataLoader(TensorDataset(torch.from_numpy(z)), batch_size=batch_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # secure-RNG and backward-hook notices
        module, optim, loader = opacus.PrivacyEngine().make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=lr),
            data_loader=loader,
            noise_multiplier=sigma,
            max_grad_norm=clip,
            poisson_sampling=poisson,
        )
        for _ in range(epochs):
            for (x,) in loader:
                optim.zero_grad()
                nn.functional.softplus(-module(x)).mean().backward()
                optim.step()
    return model.weight.detach().numpy()[0].copy()


def _bt_data(n: int, p: int, rng: np.random.Generator, beta: float = 4.0) -> np.ndarray:
    """Draw unit pair differences, chosen minus rejected, from a BT model with a known axis."""
    x = rng.standard_normal((n, p))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    flip = rng.random(n) >= 1 / (1 + np.exp(-beta * x[:, 0]))
    return np.where(flip[:, None], -x, x)


@pytest.mark.parametrize("clip", [1.0, 100.0], ids=["clip-binds", "clip-slack"])
def test_full_batch_matches_opacus(clip: float) -> None:
    rng = np.random.default_rng(0)
    sizes, p, t, lr = [48, 64], 6, 25, 0.5
    zs = [3.0 * rng.standard_normal((n, p)) + 0.5 for n in sizes]
    # At theta=0 the per-example gradient norm is |z| / 2: clip=1 binds for most rows.
    binds = np.linalg.norm(zs[0], axis=1) / 2 > clip
    assert binds.mean() > 0.5 if clip == 1.0 else not binds.any()
    groups = np.repeat([1, 0], sizes)
    ours = train_linear_bt(
        np.vstack(zs),
        groups,
        n_groups=2,
        sample_rates=np.ones(2),
        steps=np.full(2, t),
        noise_multiplier=0.0,
        clip=clip,
        lr=lr,
        expected_batch_sizes=np.array(sizes[::-1], dtype=float),
        rng=np.random.default_rng(1),
    )
    for k, zk in zip([1, 0], zs, strict=True):
        ref = _opacus_fit(
            zk, batch_size=len(zk), epochs=t, sigma=0.0, clip=clip, lr=lr, poisson=False
        )
        # opacus clips with clip / (norm + 1e-6), a ~1e-7 relative difference here.
        np.testing.assert_allclose(ours[k], ref, atol=1e-5)


def test_noisy_accuracy_matches_opacus() -> None:
    n, p, batch, epochs, sigma, lr, seeds = 400, 5, 20, 3, 1.0, 0.5, 12
    data_rng = np.random.default_rng(123)
    z_train, z_test = _bt_data(n, p, data_rng), _bt_data(4000, p, data_rng)
    q = 1 / -(-n // batch)  # opacus's rate: 1 / number of batches per epoch
    acc_ours, acc_opacus = [], []
    for seed in range(seeds):
        theta = _fit(
            z_train, np.zeros(n, dtype=int), seed, q=q, t=round(epochs / q), sigma=sigma,
            b=float(int(n * q)), lr=lr,
        )[0]  # fmt: skip
        ref = _opacus_fit(
            z_train, batch_size=batch, epochs=epochs, sigma=sigma, clip=1.0, lr=lr,
            poisson=True, seed=seed,
        )  # fmt: skip
        acc_ours.append((z_test @ theta > 0).mean())
        acc_opacus.append((z_test @ ref > 0).mean())
    assert min(np.mean(acc_ours), np.mean(acc_opacus)) > 0.6  # both learn the axis
    assert stats.ttest_ind(acc_ours, acc_opacus, equal_var=False).pvalue > 0.01


def test_batch_sizes_are_binomial() -> None:
    n, q, t = 1000, 0.01, 20_000
    sizes, idx = poisson_subsample(n, q, t, np.random.default_rng(0))
    assert sizes.shape == (t,) and idx.shape == (sizes.sum(),)
    mean, var = n * q, n * q * (1 - q)
    assert abs(sizes.mean() - mean) < 4 * np.sqrt(var / t)
    assert abs(sizes.var() / var - 1) < 5 * np.sqrt(2 / t)


@pytest.mark.parametrize(("n", "q"), [(6, 0.5), (6, 0.9)])
def test_subsets_have_poisson_law(n: int, q: float) -> None:
    """Every subset S must have probability q^|S| (1-q)^(n-|S|); both draw paths are hit."""
    t = 32_000
    sizes, idx = poisson_subsample(n, q, t, np.random.default_rng(1))
    step_of, bits = np.repeat(np.arange(t), sizes), 1 << idx
    codes, union = np.zeros(t, dtype=np.int64), np.zeros(t, dtype=np.int64)
    np.add.at(codes, step_of, bits)
    np.bitwise_or.at(union, step_of, bits)
    assert (codes == union).all()  # no index repeats within a step
    subsets = list(itertools.product([0, 1], repeat=n))
    prob = np.array([q ** sum(s) * (1 - q) ** (n - sum(s)) for s in subsets])
    code_of = [sum(bit << i for i, bit in enumerate(s)) for s in subsets]
    observed = np.bincount(codes, minlength=1 << n)[code_of]
    assert stats.chisquare(observed, prob * t).pvalue > 1e-3


def test_inclusion_counts_uniform() -> None:
    n, q, t = 50, 0.2, 5000
    sizes, idx = poisson_subsample(n, q, t, np.random.default_rng(2))
    assert idx.min() >= 0 and idx.max() < n
    counts = np.bincount(idx, minlength=n)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_matches_per_step_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lockstep, padded, chunked loop equals a plain loop on the same random draws."""
    monkeypatch.setattr(sgd, "_CHUNK_FLOATS", 500)  # force many chunks of varying width
    rng = np.random.default_rng(3)
    k, p, sigma, clip, lr = 4, 3, 0.7, 0.8, 0.3
    counts = np.array([30, 0, 55, 12])  # group 1 has no rows: noise only
    groups = rng.permutation(np.repeat(np.arange(k), counts))
    z = 2.0 * rng.standard_normal((groups.size, p))
    rates, steps = np.array([0.2, 0.5, 0.05, 1.0]), np.array([37, 11, 120, 0])
    batch, theta0 = np.array([6.0, 1.0, 2.5, 12.0]), rng.standard_normal((k, p))
    kw = dict(n_groups=k, sample_rates=rates, steps=steps, noise_multiplier=sigma, clip=clip)
    ours = train_linear_bt(
        z, groups, **kw, lr=lr, expected_batch_sizes=batch, theta0=theta0,
        rng=np.random.default_rng(9),
    )  # fmt: skip
    streams = np.random.default_rng(9).spawn(k)
    for g in range(k):
        zg, theta = z[groups == g], theta0[g].copy()
        sizes, idx = poisson_subsample(len(zg), rates[g], steps[g], streams[g])
        noise = streams[g].standard_normal((steps[g], p))
        ends = np.cumsum(sizes)
        for t in range(steps[g]):
            rows = idx[ends[t] - sizes[t] : ends[t]]
            grads = -zg[rows] / (1 + np.exp(zg[rows] @ theta))[:, None]
            norms = np.linalg.norm(grads, axis=1, keepdims=True)
            clipped = grads * np.minimum(1, clip / np.maximum(norms, 1e-300))
            theta -= lr * (clipped.sum(0) + sigma * clip * noise[t]) / batch[g]
        np.testing.assert_allclose(ours[g], theta, rtol=1e-12, atol=1e-12)


def test_empty_batches_add_calibrated_noise() -> None:
    p, t, sigma, clip, lr, b = 20_000, 4, 2.0, 0.5, 0.3, 1.5
    theta = _fit(np.zeros((0, p)), np.zeros(0, dtype=int), t=t, sigma=sigma, b=b, lr=lr, clip=clip)
    expected = np.sqrt(t) * lr * sigma * clip / b
    assert abs(theta.std() / expected - 1) < 0.03 and abs(theta.mean()) < 0.05 * expected


def test_zero_steps_keep_theta0_and_groups_are_independent() -> None:
    rng = np.random.default_rng(4)
    z, groups = rng.standard_normal((300, 4)), rng.integers(0, 3, 300)
    theta0 = rng.standard_normal((3, 4))
    kw = dict(n_groups=3, sample_rates=np.full(3, 0.1), noise_multiplier=1.0, theta0=theta0)
    kw |= dict(expected_batch_sizes=np.full(3, 10.0))
    base = train_linear_bt(
        z, groups, steps=np.array([50, 0, 80]), rng=np.random.default_rng(5), **kw
    )
    np.testing.assert_array_equal(base[1], theta0[1])
    # Changing group 2's rows and step count must not move group 0.
    z2 = np.where((groups == 2)[:, None], -3 * z, z)
    other = train_linear_bt(
        z2, groups, steps=np.array([50, 0, 9]), rng=np.random.default_rng(5), **kw
    )
    np.testing.assert_allclose(other[0], base[0], rtol=1e-12, atol=1e-12)
    assert not np.allclose(other[2], base[2])


def test_fixed_seed_repeats() -> None:
    rng = np.random.default_rng(6)
    z, groups = rng.standard_normal((200, 5)), rng.integers(0, 2, 200)
    first = _fit(z, groups, 7, n_groups=2)
    np.testing.assert_array_equal(first, _fit(z, groups, 7, n_groups=2))
    assert not np.allclose(first, _fit(z, groups, 8, n_groups=2))


def test_extreme_margins_are_stable() -> None:
    z = np.array([[1e4, 0.0], [-1e4, 0.0], [0.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        theta = _fit(z, np.zeros(3, dtype=int), q=1.0, sigma=0.0, theta0=np.array([[50.0, 1.0]]))
    # Row 0 has margin 5e5 (zero gradient), row 1 a clipped gradient pushing theta[0] down.
    np.testing.assert_allclose(theta, [[50.0 - 20 * 0.1 * 1.0 / 4.0, 1.0]])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"z": np.ones(5)}, "2-D"),
        ({"z": np.array([[np.nan, 0.0]] * 5)}, "non-finite"),
        ({"groups": np.array([0, 0, 0, 0, 2])}, r"\[0, 2\)"),
        ({"groups": np.zeros(4, dtype=int)}, "groups must have shape"),
        ({"groups": np.zeros(5)}, "integers"),
        ({"n_groups": 0}, "n_groups"),
        ({"sample_rates": np.array([0.0, 0.5])}, r"\(0, 1\]"),
        ({"sample_rates": np.array([0.5, 1.5])}, r"\(0, 1\]"),
        ({"sample_rates": np.array([0.5])}, "sample_rates must have shape"),
        ({"steps": np.array([3, -1])}, "non-negative"),
        ({"steps": np.array([3.5, 1.0])}, "integers"),
        ({"expected_batch_sizes": np.array([0.0, 1.0])}, "positive"),
        ({"noise_multiplier": -1.0}, "noise_multiplier"),
        ({"clip": 0.0}, "clip"),
        ({"lr": np.inf}, "lr"),
        ({"theta0": np.zeros((2, 3))}, "theta0 must have shape"),
    ],
)
def test_bad_inputs_raise(change: dict, match: str) -> None:
    args = {
        "z": np.ones((5, 2)),
        "groups": np.array([0, 1, 0, 1, 0]),
        "n_groups": 2,
        "sample_rates": np.array([0.5, 0.5]),
        "steps": np.array([3, 3]),
        "noise_multiplier": 1.0,
        "expected_batch_sizes": np.array([1.0, 1.0]),
        "rng": np.random.default_rng(0),
    } | change
    with pytest.raises(ValueError, match=match):
        train_linear_bt(args.pop("z"), args.pop("groups"), **args)
