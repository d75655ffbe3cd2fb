"""One-run audit of the DP-SGD reward stage (DPSGDReward, hence dp/sgd.py).

Canaries are unit preference vectors in more dimensions than records, so a noise-free DP-SGD
run memorises each included one; the audit must refute the claim then, and not on ours.
"""

from __future__ import annotations

import numpy as np
import pytest
from one_run_canaries import NoiselessGenerator, make_canary_data

import dpprefsyn.dp.reward as reward_module
from dpprefsyn.audit import AuditResult, audit, linear_scores
from dpprefsyn.dp import DPSGDReward
from dpprefsyn.privacy.accountants import calibrate_subsampled_gaussian

M, D, N_ORDINARY = 500, 1000, 200
K = 100  # guesses "in" and "out" each: 200 of the 500 canaries, fixed in advance
EPSILON, DELTA = 2.0, 1e-5
# The divisor and plan come from a public size (the expected one), not from how many canaries
# went in: as in the pipeline, where they come from the DP histogram.
NOISY_COUNT = N_ORDINARY + M / 2
PLAN = [(4 / NOISY_COUNT, 450)]  # (sample rate, steps) at the defaults: batch 4, 4 epochs
# calibrate_subsampled_gaussian(EPSILON, DELTA, PLAN), pinned: the search takes ~10-25 s here.
# The accountant still prices it in every run (epsilon_spent_), and a slow test re-derives it.
SIGMA = 0.8152


@pytest.fixture
def pinned_calibration(monkeypatch):
    """Answer the calibration with SIGMA, for exactly the plan it was computed on."""

    def calibrate(epsilon, delta, plans):
        assert (epsilon, delta) == (EPSILON, DELTA)
        assert [t for _, t in plans] == [t for _, t in PLAN]
        assert [q for q, _ in plans] == pytest.approx([q for q, _ in PLAN])
        return SIGMA

    monkeypatch.setattr(reward_module, "calibrate_subsampled_gaussian", calibrate)


def run_audit(rng: np.random.Generator) -> tuple[AuditResult, DPSGDReward]:
    data = make_canary_data(M, D, N_ORDINARY, seed=0)
    z = data.training
    est = DPSGDReward(epsilon=EPSILON, delta=DELTA, random_state=rng)
    est.fit(z, np.zeros(len(z), dtype=np.int64), np.array([NOISY_COUNT]))
    scores = linear_scores(est.coef_[0], data.canaries, known=data.ordinary)
    return audit(scores, data.included, k_pos=K, k_neg=K, delta=DELTA), est


def test_dpsgd_reward_passes_the_one_run_audit(pinned_calibration) -> None:
    """At the claimed (2, 1e-5) the canaries' scores refute nothing above the claim."""
    result, est = run_audit(np.random.default_rng(1))
    assert est.noise_multiplier_ == SIGMA
    assert est.epsilon_spent_ <= EPSILON  # the accountant prices the pinned noise within budget
    assert result.n_guesses == 2 * K
    assert result.epsilon_lower_bound <= EPSILON


def test_dpsgd_reward_without_noise_fails_the_one_run_audit(pinned_calibration) -> None:
    """The same run with the noise draws zeroed: near-perfect guesses refute epsilon = 2.

    All 200 guesses right refute up to 4.2 at 95% (199 right: 3.7, 190 right: 2.4), so the bound
    clears the claim with room to spare.
    """
    result, est = run_audit(NoiselessGenerator(np.random.PCG64(1)))
    assert est.epsilon_spent_ <= EPSILON  # it still claims the same guarantee
    assert result.n_correct >= 0.95 * result.n_guesses
    assert result.epsilon_lower_bound > EPSILON


@pytest.mark.slow
def test_pinned_noise_multiplier_is_the_calibrated_one() -> None:
    """SIGMA is what the calibration gives for the audited plan."""
    assert calibrate_subsampled_gaussian(EPSILON, DELTA, PLAN) == pytest.approx(SIGMA, rel=1e-3)
