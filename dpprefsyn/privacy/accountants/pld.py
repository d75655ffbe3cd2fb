"""PLD accounting (Google's dp-accounting) for Poisson-subsampled Gaussian steps.

The PRV accountant's error bar is absolute (``EPS_ERROR``), which at small epsilons is a large
relative overestimate (0.014 for a true 0.0034). The pessimistic PLD estimate is also a valid
upper bound and is tight there, so a DP-SGD release reports the smaller of the two.
"""

from __future__ import annotations

import dp_accounting
from dp_accounting.pld import PLDAccountant

FINE_INTERVAL = 1e-4


def pld_subsampled_gaussian_epsilon(
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    *,
    interval: float = FINE_INTERVAL,
) -> float:
    """Upper bound on epsilon: the pessimistic PLD of ``steps`` subsampled Gaussian steps.

    ``interval`` is the privacy-loss discretisation; a coarser one is faster and can only
    overestimate.
    """
    if steps == 0:
        return 0.0
    event = dp_accounting.GaussianDpEvent(noise_multiplier)
    if sample_rate < 1.0:
        event = dp_accounting.PoissonSampledDpEvent(sample_rate, event)
    accountant = PLDAccountant(value_discretization_interval=interval)
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, int(steps)))
    return max(0.0, float(accountant.get_epsilon(delta)))
