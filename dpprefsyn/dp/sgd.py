"""Vectorised DP-SGD for many linear Bradley-Terry rewards at once, in pure numpy.

opacus trains one torch model per call and pays milliseconds of autograd, hook and DataLoader
overhead per step. A linear BT model has a closed-form per-example gradient, so all clusters can
step in lockstep on small padded numpy arrays with every random draw made up front; this is two
to three orders of magnitude faster per step (``benchmarks/dpsgd_speed.py``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["poisson_subsample", "train_linear_bt"]

# Floats gathered per chunk of lockstep steps (2 MiB of float64): rows are gathered per chunk,
# not per step, to keep the Python loop short, and a cache-sized chunk measured fastest. It also
# bounds memory when a group has large batches (a chunk then holds a single step).
_CHUNK_FLOATS = 1 << 18
# Upper bound on steps per chunk, which bounds the pre-drawn noise held at once.
_CHUNK_STEPS = 4096


def poisson_subsample(
    n: int, sample_rate: float, steps: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``steps`` Poisson subsamples of ``range(n)``, each record kept w.p. ``sample_rate``.

    Drawing ``n`` Bernoullis per step costs ``O(n * steps)``, i.e. ``O(n^2)`` per epoch at a
    fixed batch size. Instead the batch size is drawn as ``Binomial(n, q)`` and then a uniformly
    random subset of that size, which has exactly the same law. Small subsets are drawn with
    replacement and a step is redrawn whole if it holds a duplicate (rejection makes the subset
    exactly uniform); subsets too large for rejection to be cheap use ``Generator.choice``.

    Parameters
    ----------
    n : int
        Number of records.
    sample_rate : float
        Inclusion probability ``q`` in ``(0, 1]``.
    steps : int
        Number of independent subsamples.
    rng : numpy.random.Generator
        Source of all randomness.

    Returns
    -------
    sizes : numpy.ndarray of shape (steps,)
        Batch size of each step.
    indices : numpy.ndarray of shape (sizes.sum(),)
        The steps' record indices, concatenated in step order (unordered within a step).
    """
    if n < 0 or steps < 0 or not 0 < sample_rate <= 1:
        raise ValueError("need n >= 0, steps >= 0 and sample_rate in (0, 1]")
    sizes = rng.binomial(n, sample_rate, size=steps)
    indices = np.empty(int(sizes.sum()), dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes)))
    # Expected duplicate pairs b(b-1)/2n <= 1 keeps the acceptance rate above ~1/e.
    small = sizes * (sizes - 1) <= 2 * n
    for t in np.flatnonzero(~small):
        b = int(sizes[t])
        indices[starts[t] : starts[t + 1]] = (
            np.arange(n) if b == n else rng.choice(n, size=b, replace=False)
        )
    pending = np.flatnonzero(small & (sizes > 1))
    single = np.flatnonzero(sizes == 1)
    indices[starts[single]] = rng.integers(0, n, size=single.size)
    while pending.size:
        b = sizes[pending]
        step_of = np.repeat(np.arange(pending.size), b)
        pos = starts[pending][step_of] + np.arange(step_of.size) - np.repeat(np.cumsum(b) - b, b)
        draw = rng.integers(0, n, size=step_of.size)
        indices[pos] = draw
        key = np.sort(step_of * n + draw)
        dup = np.unique(key[1:][key[1:] == key[:-1]] // n)
        pending = pending[dup]
    return sizes, indices


def _validate(
    z: np.ndarray,
    groups: np.ndarray,
    n_groups: int,
    sample_rates: np.ndarray,
    steps: np.ndarray,
    noise_multiplier: float,
    clip: float,
    lr: float,
    expected_batch_sizes: np.ndarray,
    theta0: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Check shapes and ranges; messages never quote private values."""
    if isinstance(n_groups, bool) or not isinstance(n_groups, int | np.integer) or n_groups < 1:
        raise ValueError("n_groups must be a positive integer")
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 2 or z.shape[1] == 0:
        raise ValueError(f"z must be 2-D (n, p) with p >= 1, got shape {z.shape}")
    if not np.isfinite(z).all():
        raise ValueError("z contains non-finite values")
    groups = np.asarray(groups)
    if groups.shape != (z.shape[0],):
        raise ValueError(f"groups must have shape ({z.shape[0]},), got {groups.shape}")
    if groups.size and (
        not np.issubdtype(groups.dtype, np.integer) or groups.min() < 0 or groups.max() >= n_groups
    ):
        raise ValueError(f"groups must be integers in [0, {n_groups})")

    def per_group(name: str, value: np.ndarray) -> np.ndarray:
        arr = np.asarray(value)
        if arr.shape != (n_groups,):
            raise ValueError(f"{name} must have shape ({n_groups},), got {arr.shape}")
        return arr

    rates = per_group("sample_rates", sample_rates).astype(np.float64)
    if not ((rates > 0) & (rates <= 1)).all():
        raise ValueError("sample_rates must lie in (0, 1]")
    steps = per_group("steps", steps)
    if not np.issubdtype(steps.dtype, np.integer) or (steps < 0).any():
        raise ValueError("steps must be non-negative integers")
    batch = per_group("expected_batch_sizes", expected_batch_sizes).astype(np.float64)
    if not (np.isfinite(batch) & (batch > 0)).all():
        raise ValueError("expected_batch_sizes must be finite and positive")
    if not (np.isfinite(noise_multiplier) and noise_multiplier >= 0):
        raise ValueError("noise_multiplier must be finite and >= 0")
    if not (np.isfinite(clip) and clip > 0):
        raise ValueError("clip must be finite and > 0")
    if not (np.isfinite(lr) and lr > 0):
        raise ValueError("lr must be finite and > 0")
    if theta0 is None:
        theta = np.zeros((n_groups, z.shape[1]))
    else:
        theta = np.array(theta0, dtype=np.float64)
        if theta.shape != (n_groups, z.shape[1]):
            raise ValueError(f"theta0 must have shape {(n_groups, z.shape[1])}, got {theta.shape}")
        if not np.isfinite(theta).all():
            raise ValueError("theta0 contains non-finite values")
    return z, groups, rates, steps.astype(np.int64), batch, theta


def train_linear_bt(
    z: np.ndarray,
    groups: np.ndarray,
    *,
    n_groups: int,
    sample_rates: np.ndarray,
    steps: np.ndarray,
    noise_multiplier: float,
    clip: float = 1.0,
    lr: float = 0.1,
    expected_batch_sizes: np.ndarray,
    rng: np.random.Generator,
    theta0: np.ndarray | None = None,
    progress: bool = False,
) -> np.ndarray:
    """Fit one linear Bradley-Terry reward per group with DP-SGD, all groups in lockstep.

    Group ``k`` minimises ``-log sigmoid(theta_k . z_i)`` over its rows. Each step draws a
    Poisson subsample (every row of the group independently with probability ``q_k``), clips
    each per-example gradient ``-(1 - sigmoid(theta_k . z_i)) z_i`` to norm ``clip``, sums,
    adds ``N(0, (noise_multiplier * clip)^2 I)``, divides by ``expected_batch_sizes[k]`` (as
    opacus does, so the divisor is data-independent) and takes a plain SGD step. Groups with
    fewer steps stop earlier. The result matches opacus on ``nn.Linear(p, 1, bias=False)``.

    Parameters
    ----------
    z : numpy.ndarray of shape (n, p)
        Per-pair features, e.g. projected embedding of chosen minus rejected; finite.
    groups : numpy.ndarray of shape (n,)
        Integer group (cluster) of each row, in ``[0, n_groups)``.
    n_groups : int
        Number of groups ``K``.
    sample_rates : numpy.ndarray of shape (K,)
        Poisson sampling rate ``q_k`` in ``(0, 1]``.
    steps : numpy.ndarray of shape (K,)
        Number of steps per group, ``>= 0``; a group with 0 steps keeps ``theta0``.
    noise_multiplier : float
        ``sigma``; the noise std on the summed clipped gradients is ``sigma * clip``.
    clip : float, default=1.0
        Per-example gradient norm bound.
    lr : float, default=0.1
        SGD learning rate.
    expected_batch_sizes : numpy.ndarray of shape (K,)
        Divisor of the noisy gradient sum, normally ``q_k`` times a public group size.
    rng : numpy.random.Generator
        Source of all randomness; one independent child stream is spawned per group, so a
        group's fit depends only on its own rows and parameters.
    theta0 : numpy.ndarray of shape (K, p) or None, default=None
        Starting point; zeros when None.
    progress : bool, default=False
        Show a tqdm bar over lockstep steps.

    Returns
    -------
    numpy.ndarray of shape (K, p)
        The learned ``theta_k``, one row per group.

    Raises
    ------
    ValueError
        On a bad shape, a rate outside ``(0, 1]``, negative steps, non-positive clip, lr or
        batch divisor, or non-finite ``z``/``theta0``.

    Privacy
    -------
    Each step of group ``k`` is the Poisson-subsampled Gaussian mechanism with rate ``q_k``
    and noise multiplier ``sigma``: under add/remove of one record, the sum of clipped
    gradients changes by at most ``clip`` in L2 norm and the noise std is ``sigma * clip``.
    Group ``k`` composes ``steps[k]`` such steps (account with an RDP/PRV accountant on
    ``(q_k, sigma, steps[k])``). Groups are disjoint, so by parallel composition the whole
    release costs the maximum, not the sum, of the per-group budgets. This requires that each
    record lies in exactly one group and that its group is a function of the record itself and
    of earlier DP releases only (e.g. nearest DP centroid), never of other private records.

    ``sample_rates``, ``steps`` and ``expected_batch_sizes`` must come from public or already
    DP-released values (e.g. a DP histogram of cluster sizes), never from exact private
    counts: they shape the output, so an exact count would leak through them. Empty batches
    still receive noise, as the accounting assumes. numpy's generator is not a
    cryptographically secure RNG and floating-point noise is not exactly Gaussian (see
    Mironov, CCS 2012); the guarantee is the textbook one, as with opacus's default mode.

    References
    ----------
    Abadi et al., "Deep Learning with Differential Privacy", CCS 2016.
    Mironov, Talwar, Zhang, "Renyi Differential Privacy of the Sampled Gaussian Mechanism", 2019.
    """
    z, groups, rates, steps, batch, theta = _validate(
        z, groups, n_groups, sample_rates, steps, noise_multiplier, clip, lr,
        expected_batch_sizes, theta0,
    )  # fmt: skip
    n, p = z.shape
    order = np.argsort(groups, kind="stable")
    counts = np.bincount(groups, minlength=n_groups)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    # Rows sorted by group plus a zero row that padded batch slots point at.
    z_pad = np.vstack([z[order], np.zeros((1, p))])
    norms = np.linalg.norm(z_pad, axis=1)
    # Clipped gradient of row i is -w_i z_i with w_i = min(1 - sigmoid(m_i), clip / |z_i|);
    # inf for zero rows is harmless since their gradient is zero, and the pad row gets 0.
    with np.errstate(divide="ignore"):
        row_cap = np.where(norms > 0, clip / norms, np.inf)
    row_cap[n] = 0.0

    streams = rng.spawn(n_groups)
    sizes = np.zeros((n_groups, int(steps.max(initial=0))), dtype=np.int64)
    flat: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    slots: list[np.ndarray] = []
    for k in range(n_groups):
        b, idx = poisson_subsample(int(counts[k]), rates[k], int(steps[k]), streams[k])
        sizes[k, : steps[k]] = b
        start = np.concatenate(([0], np.cumsum(b)))
        flat.append(idx + offsets[k])
        starts.append(start)
        slots.append(np.arange(idx.size) - np.repeat(start[:-1], b))

    step_scale = lr / batch
    noise_std = noise_multiplier * clip
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=sizes.shape[1], desc="dp-sgd", unit="step")
    t0 = 0
    with np.errstate(over="ignore"):
        while t0 < sizes.shape[1]:
            active = np.flatnonzero(steps > t0)
            # Chunks end where a group finishes, so every group in a chunk runs all its steps.
            t_end = min(int(steps[active].min()), t0 + _CHUNK_STEPS)
            width = np.maximum(np.maximum.accumulate(sizes[active, t0:t_end].max(axis=0)), 1)
            cost = width * np.arange(1, width.size + 1) * active.size * p
            tc = max(1, int(np.searchsorted(cost, _CHUNK_FLOATS, side="right")))
            bc = int(width[tc - 1])
            idx = np.full((tc, active.size, bc), n, dtype=np.int64)
            noise = np.empty((tc, active.size, p, 1))
            for j, k in enumerate(active):
                lo, hi = starts[k][t0], starts[k][t0 + tc]
                step_of = np.repeat(np.arange(tc), sizes[k, t0 : t0 + tc])
                idx[step_of, j, slots[k][lo:hi]] = flat[k][lo:hi]
                noise[:, j, :, 0] = streams[k].standard_normal((tc, p))
            scale = step_scale[active][:, None, None]
            noise *= noise_std * scale
            # Pre-scaled by lr / batch, like the weights below, to save a multiply per step.
            caps = row_cap[idx][..., None] * scale
            th = theta[active][:, :, None]
            for zb, cap, nz in zip(z_pad[idx], caps, noise, strict=True):
                w = zb @ th
                # lr/B * sigmoid(-margin) = lr/B / (1 + exp(margin)); overflow to inf gives 0.
                np.exp(w, out=w)
                w += 1.0
                np.divide(scale, w, out=w)
                np.minimum(w, cap, out=w)
                th += zb.transpose(0, 2, 1) @ w
                th -= nz
            theta[active] = th[:, :, 0]
            t0 += tc
            if bar is not None:
                bar.update(tc)
    if bar is not None:
        bar.close()
    return theta
