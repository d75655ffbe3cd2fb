"""PRV accounting of DP-SGD, cross-checked against opacus (RDP, PRV) and Google's PLD.

Each PRV call costs ~0.3-1 s and a calibration ~1-10 s, so the grid (:data:`GRID`) is a
covering subset of our defaults and the edges, not the full product.
"""

from __future__ import annotations

import math

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant

from dpprefsyn.privacy import Release
from dpprefsyn.privacy.accountants import (
    calibrate_subsampled_gaussian,
    prv_epsilon,
    subsampled_gaussian_epsilon,
)
from dpprefsyn.privacy.accountants.prv import EPS_ERROR, prv_subsampled_gaussian_epsilon
from dpprefsyn.privacy.analysis import gaussian_epsilon, gaussian_mu

# (sample_rate, noise_multiplier, steps, delta): our defaults (q = 4/400 and 4/2000; sigma 0.8
# and 1.5; 100 and 2000 steps; delta 1e-5 and 1/2000) and the edges users hit: a single step,
# tiny epsilon (huge noise), large epsilon (little noise), q close to and equal to 1.
GRID = [
    (4 / 400, 0.8, 1, 1e-5),
    (4 / 400, 1.5, 100, 1 / 2000),
    (4 / 400, 0.8, 2000, 1e-5),
    (4 / 2000, 1.5, 2000, 1e-5),
    (4 / 2000, 0.8, 100, 1 / 2000),
    (0.01, 20.0, 10, 1e-5),  # epsilon ~ 0.003
    (0.001, 10.0, 100, 1e-5),  # epsilon ~ 0.002
    (0.99, 1.0, 10, 1e-5),  # epsilon ~ 18
    (0.999, 2.0, 1, 1e-6),
    (1.0, 1.0, 1, 1e-5),
]


def pld_epsilon(q: float, sigma: float, steps: int, delta: float) -> float:
    """Google's pessimistic PLD epsilon on a grid at least twice finer than ours."""
    event = dp_accounting.GaussianDpEvent(sigma)
    if q < 1:
        event = dp_accounting.PoissonSampledDpEvent(q, event)
    composed = dp_accounting.SelfComposedDpEvent(event, steps)
    coarse = PLDAccountant(value_discretization_interval=1e-3).compose(composed)
    interval = min(5e-5, 1e-3 * coarse.get_epsilon(delta))
    fine = PLDAccountant(value_discretization_interval=interval).compose(composed)
    return fine.get_epsilon(delta)


@pytest.fixture(scope="module")
def opacus_accountants():
    """Return opacus's accountant classes (imported once: the import pulls in torch)."""
    from opacus.accountants import PRVAccountant, RDPAccountant

    return RDPAccountant, PRVAccountant


@pytest.mark.parametrize(("q", "sigma", "steps", "delta"), GRID)
def test_subsampled_gaussian_matches_other_accountants(q, sigma, steps, delta, opacus_accountants):
    """Our reported epsilon is within 2% of a finer PLD and below opacus's RDP; our PRV equals
    opacus's PRV.

    The reported epsilon is the smaller of two valid upper bounds, PRV and pessimistic PLD.
    PRV alone returns the top of its error bar ``estimate + EPS_ERROR`` (absolute): up to
    ``2 * EPS_ERROR`` above the truth, 4x too large at epsilon 0.003. That disagreement is
    asserted here as explained (within 2% plus the bar), and the PLD bound is what we report.
    """
    rdp_cls, prv_cls = opacus_accountants
    ours = subsampled_gaussian_epsilon(sigma, q, steps, delta)
    prv = prv_subsampled_gaussian_epsilon(sigma, q, steps, delta)
    reference = pld_epsilon(q, sigma, steps, delta)

    assert 0.98 * reference <= ours <= 1.02 * reference
    assert ours <= prv
    assert 0.98 * reference - 1e-3 <= prv <= 1.02 * reference + 2 * EPS_ERROR

    if q < 1:  # opacus's PRV accountant only takes subsampled Gaussians
        opacus_prv = prv_cls()
        opacus_prv.history = [(sigma, q, steps)]
        assert prv == pytest.approx(opacus_prv.get_epsilon(delta), rel=0.02, abs=1e-3)

    rdp = rdp_cls()
    rdp.history = [(sigma, q, steps)]
    assert rdp.get_epsilon(delta) >= ours


def test_epsilon_grows_with_steps_and_shrinks_with_noise() -> None:
    """More steps cost more; more noise costs less; zero steps cost nothing."""
    q, delta = 4 / 400, 1e-5
    assert subsampled_gaussian_epsilon(1.0, q, 0, delta) == 0.0
    e100 = subsampled_gaussian_epsilon(1.0, q, 100, delta)
    assert subsampled_gaussian_epsilon(1.0, q, 1000, delta) > e100
    assert subsampled_gaussian_epsilon(2.0, q, 100, delta) < e100


def test_full_batch_is_the_plain_gaussian() -> None:
    """At sample rate 1 one step is a Gaussian of mu = 1/sigma, matching the GDP formula."""
    sigma, delta = 2.0, 1e-5
    ours = subsampled_gaussian_epsilon(sigma, 1.0, 1, delta)
    exact = gaussian_epsilon(1.0 / sigma, delta)
    assert exact <= ours <= exact + 2 * EPS_ERROR


def test_calibration_hits_its_target() -> None:
    """The returned sigma meets the target; 3% less noise misses it."""
    epsilon, delta, q, steps = 0.2, 1e-5, 0.01, 10
    sigma = calibrate_subsampled_gaussian(epsilon, delta, [(q, steps)])
    assert 0.9 * epsilon <= subsampled_gaussian_epsilon(sigma, q, steps, delta) <= epsilon
    assert subsampled_gaussian_epsilon(0.97 * sigma, q, steps, delta) > epsilon


def test_calibration_never_overshoots_at_large_sigma() -> None:
    """Far from sigma = 1 the search tolerance must still land on the safe side of the target.

    Regression: brentq's ``rtol`` on log(sigma) let sigma ~ 1460 (9 full-batch steps at
    epsilon 0.015) come back 0.6% too small, costing 0.0150007 > 0.015.
    """
    epsilon, delta = 0.015, 1e-5
    sigma = calibrate_subsampled_gaussian(epsilon, delta, [(1.0, 9)])
    assert subsampled_gaussian_epsilon(sigma, 1.0, 9, delta) <= epsilon


def test_calibration_serves_the_worst_plan_and_is_analytic_at_full_batch() -> None:
    """With full-batch plans of 1 and 3 steps, the 3-step one sets sigma ~ sqrt(3)/mu(eps, delta).

    Three full-batch steps are one Gaussian of mu = sqrt(3)/sigma; PRV's error bar makes the
    calibration slightly more conservative than the exact one, never less.
    """
    epsilon, delta = 0.5, 1e-5
    sigma = calibrate_subsampled_gaussian(epsilon, delta, [(1.0, 1), (1.0, 3)])
    analytic = math.sqrt(3) / gaussian_mu(epsilon, delta)
    assert analytic <= sigma <= 1.05 * analytic
    assert subsampled_gaussian_epsilon(sigma, 1.0, 3, delta) <= epsilon


@pytest.mark.parametrize(
    ("epsilon", "delta", "plans"),
    [(0.0, 1e-5, [(0.01, 10)]), (1.0, 0.0, [(0.01, 10)]), (1.0, 1e-5, []), (1.0, 1e-5, [(0.1, 0)])],
)
def test_calibration_rejects_bad_input(epsilon, delta, plans) -> None:
    """Non-positive epsilon, delta outside (0, 1) and plans without steps are errors."""
    with pytest.raises(ValueError):
        calibrate_subsampled_gaussian(epsilon, delta, plans)


def test_prv_epsilon_of_gaussians_and_pure() -> None:
    """Non-adaptive PRV composition agrees with GDP plus basic composition (within eps_error).

    PRV composes the pure release tightly, so it may be below the ledger's basic composition,
    never above it by more than its error bar.
    """
    delta = 1e-5
    releases = [
        Release("pca", "gaussian", epsilon=1.0, delta=delta, mu=0.5),
        Release("reward", "gaussian", epsilon=1.0, delta=delta, mu=0.5),
        Release("count", "laplace", epsilon=0.05),
    ]
    ledger_style = 0.05 + gaussian_epsilon(math.hypot(0.5, 0.5), delta)
    prv = prv_epsilon(releases, delta)
    assert gaussian_epsilon(math.hypot(0.5, 0.5), delta) <= prv + 1e-6
    assert prv <= ledger_style + EPS_ERROR


def test_prv_epsilon_parallel_group_costs_its_worst_member() -> None:
    """A group of DP-SGD releases on disjoint clusters costs what its worst member costs."""
    delta = 1e-5
    members = [
        Release(
            "reward",
            "subsampled_gaussian",
            epsilon=1.0,
            delta=delta,
            group="clusters",
            params={"noise_multiplier": 1.0, "sample_rate": q, "steps": 20},
        )
        for q in (0.01, 0.05)
    ]
    worst = prv_subsampled_gaussian_epsilon(1.0, 0.05, 20, delta)
    assert prv_epsilon(members, delta) == pytest.approx(worst, rel=1e-6)


def test_calibration_survives_prv_breakdown_at_tiny_noise() -> None:
    """A large budget drives the search to tiny noise, where the PRV discretisation raises.

    Regression: the small-data OASST benchmark crashed with "Discrete mean differs from
    continuous mean significantly"; such a noise level must count as over budget instead.
    """
    sigma = calibrate_subsampled_gaussian(40.0, 1e-3, [(0.05, 80)])
    assert 0 < sigma < 1
    assert subsampled_gaussian_epsilon(sigma, 0.05, 80, 1e-3) <= 40.0
