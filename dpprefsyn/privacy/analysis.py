"""Closed-form privacy math for the Gaussian mechanism (pure functions, no bookkeeping).

Gaussian releases are tracked as mu-GDP (Dong, Roth and Su 2022): a Gaussian mechanism with
L2 sensitivity ``s`` and noise std ``sigma`` is ``s/sigma``-GDP, GDP composes by
``mu = sqrt(sum(mu_i**2))`` even when later noise scales are chosen from earlier outputs
(Smith and Thakurta 2022, fully adaptive GDP composition), and mu-GDP is exactly
``(eps, delta(eps))``-DP for every eps with the formula below (Balle and Wang 2018).
"""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.stats import norm


def gaussian_delta(mu: float, epsilon: float) -> float:
    """Tight delta of a mu-GDP mechanism at ``epsilon``."""
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    a = norm.cdf(-epsilon / mu + mu / 2)
    # exp(eps) * Phi(...) in log space so large epsilon neither overflows nor loses precision.
    b = math.exp(epsilon + norm.logcdf(-epsilon / mu - mu / 2))
    return max(0.0, float(a - b))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon at which a mu-GDP mechanism is (epsilon, delta)-DP."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if mu <= 0:
        return 0.0
    if gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_delta(mu, hi) > delta:
        hi *= 2
        if hi > 1e6:
            return math.inf
    return float(brentq(lambda e: gaussian_delta(mu, e) - delta, 0.0, hi, xtol=1e-12))


def gaussian_mu(epsilon: float, delta: float) -> float:
    """Largest mu such that mu-GDP implies (epsilon, delta)-DP (analytic Gaussian calibration)."""
    if epsilon <= 0:
        raise ValueError(f"epsilon must be positive, got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if math.isinf(epsilon):
        return math.inf
    hi = 1.0
    while gaussian_delta(hi, epsilon) < delta:
        hi *= 2
    return float(brentq(lambda m: gaussian_delta(m, epsilon) - delta, 1e-12, hi, xtol=1e-14))
