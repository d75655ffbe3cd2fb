"""PRV accounting for Poisson-subsampled Gaussian (DP-SGD) and mixed compositions.

A DP-SGD release reports the smaller of PRV's and the PLD's (:mod:`.pld`) upper bounds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from prv_accountant import (
    GaussianMechanism,
    LaplaceMechanism,
    PoissonSubsampledGaussianMechanism,
    PRVAccountant,
    PureDPMechanism,
)
from scipy.optimize import brentq

from dpprefsyn.privacy.accountants.pld import FINE_INTERVAL, pld_subsampled_gaussian_epsilon
from dpprefsyn.privacy.releases import Release

EPS_ERROR = 0.01


def _accountant_epsilon(prvs: list, counts: list[int], delta: float) -> float:
    """Upper bound on epsilon from the PRV accountant (its error bars work in our disfavour)."""
    acc = PRVAccountant(
        prvs=prvs,
        max_self_compositions=counts,
        eps_error=EPS_ERROR,
        delta_error=delta * 1e-3,
    )
    _, _, upper = acc.compute_epsilon(delta=delta, num_self_compositions=counts)
    return max(0.0, float(upper))


def prv_subsampled_gaussian_epsilon(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float
) -> float:
    """PRV upper bound on the epsilon of ``steps`` Poisson-subsampled Gaussian steps."""
    if steps == 0:
        return 0.0
    if sample_rate >= 1.0:
        prv = GaussianMechanism(noise_multiplier=noise_multiplier)
    else:
        prv = PoissonSubsampledGaussianMechanism(
            sampling_probability=sample_rate, noise_multiplier=noise_multiplier
        )
    return _accountant_epsilon([prv], [int(steps)], delta)


@functools.lru_cache(maxsize=1024)  # the calibration's final check prices each release once
def subsampled_gaussian_epsilon(
    noise_multiplier: float, sample_rate: float, steps: int, delta: float
) -> float:
    """Epsilon of ``steps`` Poisson-subsampled Gaussian steps at ``delta``: the smaller of two
    valid upper bounds, PRV and pessimistic PLD (:mod:`.pld`).

    PRV's error bar is absolute, so it is loose at small epsilons; there the PLD grid is refined
    in proportion to epsilon (cheap, since small epsilons have narrow privacy-loss ranges).
    """
    prv = prv_subsampled_gaussian_epsilon(noise_multiplier, sample_rate, steps, delta)
    interval = min(FINE_INTERVAL, 2e-3 * prv) if prv > 0 else FINE_INTERVAL
    pld = pld_subsampled_gaussian_epsilon(
        noise_multiplier, sample_rate, steps, delta, interval=interval
    )
    return min(prv, pld)


def calibrate_subsampled_gaussian(
    epsilon: float,
    delta: float,
    plans: Sequence[tuple[float, int]],
    *,
    rtol: float = 5e-3,
) -> float:
    """Smallest noise multiplier whose worst plan costs at most ``(epsilon, delta)``.

    ``plans`` lists ``(sample_rate, steps)`` pairs, one per disjoint group: under parallel
    composition the guarantee is that of the most expensive group, so the noise is set for it.
    The search prices noise with the pessimistic PLD bound on a grid fine for ``epsilon``
    (several times faster than PRV at many steps, and tighter, so less noise is added); the
    result is then checked with :func:`subsampled_gaussian_epsilon`, the epsilon that will be
    reported, and raised until that is within the target.
    """
    if epsilon <= 0 or not 0 < delta < 1:
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1, got ({epsilon}, {delta})")
    plans = [(q, t) for q, t in plans if t > 0]
    if not plans:
        raise ValueError("no DP-SGD step to calibrate")

    fine = min(FINE_INTERVAL, 2e-3 * epsilon)

    @functools.cache  # the bracket's ends are priced again by brentq; each costs seconds
    def cost(sigma: float, plan: tuple[float, int], interval: float = fine) -> float:
        return pld_subsampled_gaussian_epsilon(sigma, plan[0], plan[1], delta, interval=interval)

    def root(plan: tuple[float, int], lo: float, hi: float, interval: float) -> float:
        """Bracket ``log sigma`` in ``[lo, hi]`` (widening it), then find the target's root."""

        def excess(log_sigma: float) -> float:
            return cost(math.exp(log_sigma), plan, interval) - epsilon

        while excess(lo) < 0:
            lo -= 1.0
        while excess(hi) > 0:
            hi += 1.0
            if hi > math.log(1e6):
                raise ValueError("no noise multiplier below 1e6 meets the target")
        return brentq(excess, lo, hi, xtol=rtol) + rtol  # the root lies within xtol

    def solve(plan: tuple[float, int]) -> float:
        # A coarse grid (cheap; it can only overestimate epsilon) finds the neighbourhood, the
        # fine grid the root: fine evaluations at tiny noise would be the slowest of all.
        near = root(plan, math.log(0.3), math.log(2.0), 10 * fine)
        return math.exp(root(plan, near - 0.1, near, fine))

    # Calibrate on the plan that is most expensive at unit noise, then check the others at the
    # result and move to any that costs more: one search instead of one per plan and step.
    remaining = sorted(set(plans), key=lambda plan: -cost(1.0, plan))
    worst = remaining.pop(0)
    sigma = solve(worst)
    while remaining:
        worse = [plan for plan in remaining if cost(sigma, plan) > epsilon]
        if not worse:
            break
        remaining = [plan for plan in remaining if plan not in worse]
        sigma = max(solve(plan) for plan in worse)
    while any(subsampled_gaussian_epsilon(sigma, q, t, delta) > epsilon for q, t in set(plans)):
        sigma *= 1 + rtol
    return sigma


def prv_epsilon(releases: Sequence[Release], delta: float) -> float:
    """Non-adaptive PRV composition of ``releases`` at ``delta`` (a cross-check, see ledger).

    Valid when every release's parameters were fixed before any data were read. Parallel
    groups are composed with their most expensive member.
    """
    seq = [r for r in releases if r.group is None]
    groups: dict[str, list[Release]] = {}
    for r in releases:
        if r.group is not None:
            groups.setdefault(r.group, []).append(r)
    worst = 0.0
    choices = [[]] if not groups else [[m] for m in next(iter(groups.values()))]
    for extra_group in list(groups.values())[1:]:
        choices = [c + [m] for c in choices for m in extra_group]
    for choice in choices:
        prvs, counts = [], []
        for r in seq + choice:
            prv, count = _to_prv(r)
            if prv is not None:
                prvs.append(prv)
                counts.append(count)
        if prvs:
            worst = max(worst, _accountant_epsilon(prvs, counts, delta))
    return worst


def _to_prv(r: Release):
    if r.mechanism == "gaussian":
        return GaussianMechanism(noise_multiplier=1.0 / r.mu), 1
    if r.mechanism == "laplace":
        return (LaplaceMechanism(mu=r.epsilon), 1) if r.epsilon > 0 else (None, 0)
    if r.mechanism == "pure":
        return (PureDPMechanism(eps=r.epsilon), 1) if r.epsilon > 0 else (None, 0)
    q, steps = r.params["sample_rate"], int(r.params["steps"])
    sigma = r.params["noise_multiplier"]
    if steps == 0:
        return None, 0
    if q >= 1.0:
        return GaussianMechanism(noise_multiplier=sigma), steps
    return PoissonSubsampledGaussianMechanism(sampling_probability=q, noise_multiplier=sigma), steps
