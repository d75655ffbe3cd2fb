"""Closed-form GDP math: inverses, monotonicity, and agreement with independent accountants."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from prv_accountant import GaussianMechanism
from prv_accountant import PRVAccountant as MsPRVAccountant

from dpprefsyn.privacy.analysis import gaussian_delta, gaussian_epsilon, gaussian_mu

MUS = st.floats(min_value=0.05, max_value=20.0)
DELTAS = st.floats(min_value=1e-10, max_value=0.1)


@settings(max_examples=60, deadline=None)
@given(mu=MUS, delta=DELTAS)
def test_mu_of_epsilon_of_mu_is_identity(mu: float, delta: float) -> None:
    """gaussian_mu inverts gaussian_epsilon wherever the epsilon is positive."""
    assume(gaussian_delta(mu, 0.0) > delta * (1 + 1e-6))
    eps = gaussian_epsilon(mu, delta)
    assert eps > 0
    assert gaussian_mu(eps, delta) == pytest.approx(mu, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(min_value=0.01, max_value=50.0), delta=DELTAS)
def test_epsilon_of_mu_of_epsilon_is_identity(eps: float, delta: float) -> None:
    """gaussian_epsilon inverts gaussian_mu, and the returned mu meets delta exactly."""
    mu = gaussian_mu(eps, delta)
    assert gaussian_delta(mu, eps) == pytest.approx(delta, rel=1e-6)
    assert gaussian_epsilon(mu, delta) == pytest.approx(eps, rel=1e-6, abs=1e-9)


def test_gaussian_delta_is_monotone() -> None:
    """Delta decreases in epsilon and increases in mu (more noise, less risk)."""
    eps = np.linspace(0.0, 20.0, 201)
    for mu in (0.1, 0.5, 1.0, 3.0, 8.0):
        d = np.array([gaussian_delta(mu, e) for e in eps])
        assert np.all(np.diff(d) <= 0)
        assert d[0] > d[-1]
    mus = np.linspace(0.05, 10.0, 200)
    for e in (0.1, 1.0, 5.0):
        d = np.array([gaussian_delta(m, e) for m in mus])
        assert np.all(np.diff(d) >= 0)
        assert d[-1] > d[0]


def test_gaussian_delta_edge_cases() -> None:
    """Zero mu: no release (delta 0); infinite mu: no privacy (delta 1); large eps is stable."""
    assert gaussian_delta(0.0, 1.0) == 0.0
    assert gaussian_delta(math.inf, 1.0) == 1.0
    assert 0.0 <= gaussian_delta(1.0, 500.0) < 1e-100
    assert gaussian_epsilon(0.0, 1e-5) == 0.0
    assert gaussian_mu(math.inf, 1e-5) == math.inf


@pytest.mark.parametrize("bad_delta", [0.0, 1.0, -1e-5, 2.0])
def test_bad_delta_rejected(bad_delta: float) -> None:
    """Delta outside (0, 1) is an error in both directions of the conversion."""
    with pytest.raises(ValueError, match="delta"):
        gaussian_epsilon(1.0, bad_delta)
    with pytest.raises(ValueError, match="delta"):
        gaussian_mu(1.0, bad_delta)


@pytest.mark.parametrize("bad_eps", [0.0, -1.0])
def test_non_positive_epsilon_rejected(bad_eps: float) -> None:
    """A Gaussian cannot be calibrated to epsilon <= 0."""
    with pytest.raises(ValueError, match="epsilon"):
        gaussian_mu(bad_eps, 1e-5)


@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-8])
@pytest.mark.parametrize("eps", [0.05, 0.3, 0.7, 0.99])
def test_analytic_calibration_beats_classic_bound(eps: float, delta: float) -> None:
    """The classic sigma = sqrt(2 ln(1.25/delta))/eps is valid but looser: mu_analytic >= it."""
    mu_classic = eps / math.sqrt(2 * math.log(1.25 / delta))
    mu = gaussian_mu(eps, delta)
    assert mu >= mu_classic
    # The classic noise really is (eps, delta)-DP by the exact curve.
    assert gaussian_delta(mu_classic, eps) <= delta


@pytest.mark.parametrize(("mu", "delta"), [(0.5, 1e-5), (1.0, 1e-5), (2.0, 1e-6), (0.3, 1e-3)])
def test_gdp_epsilon_matches_prv_accountant(mu: float, delta: float) -> None:
    """Microsoft's PRV accountant on one Gaussian (noise multiplier 1/mu) agrees within 2%."""
    acc = MsPRVAccountant(
        prvs=[GaussianMechanism(noise_multiplier=1.0 / mu)],
        max_self_compositions=[1],
        eps_error=1e-3,
        delta_error=delta * 1e-3,
    )
    lower, estimate, upper = acc.compute_epsilon(delta=delta, num_self_compositions=[1])
    eps = gaussian_epsilon(mu, delta)
    assert eps == pytest.approx(estimate, rel=0.02)
    assert lower - 1e-9 <= eps <= upper + 1e-9


@pytest.mark.parametrize(("mu", "delta"), [(0.5, 1e-5), (0.3, 1e-3)])
def test_gdp_epsilon_matches_pld_accountant(mu: float, delta: float) -> None:
    """Google's PLD accountant (dp_accounting) on one Gaussian agrees within 2%."""
    acc = PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(1.0 / mu))
    assert gaussian_epsilon(mu, delta) == pytest.approx(acc.get_epsilon(delta), rel=0.02)


def test_gdp_composition_matches_pld_accountant() -> None:
    """Ten Gaussians of mu 0.2 are one sqrt(10)*0.2-GDP mechanism, as PLD composition finds."""
    acc = PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(1.0 / 0.2), count=10)
    delta = 1e-5
    assert gaussian_epsilon(math.sqrt(10) * 0.2, delta) == pytest.approx(
        acc.get_epsilon(delta), rel=0.02
    )
