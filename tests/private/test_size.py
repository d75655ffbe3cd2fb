"""Refusing a dataset too small for its epsilon: decided from DP releases, with the reason."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpprefsyn.errors import DatasetTooSmallError
from dpprefsyn.privacy import PrivacyLedger, Release
from dpprefsyn.private import FitConfig, fit_from_embeddings
from dpprefsyn.private.size import CONFIDENCE, NoisyCount, SizeFloor, check_dataset_size

D = 16


def pairs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = np.eye(D)[0]
    base = rng.normal(size=(n, D))
    return base + w + 0.3 * rng.normal(size=(n, D)), base


def public(m: int = 200) -> np.ndarray:
    c, r = pairs(m, seed=9)
    return c - r


def test_twenty_records_at_epsilon_half_are_refused_with_the_reason():
    cfg = FitConfig(epsilon=0.5, insecure_seed=0)
    with pytest.raises(DatasetTooSmallError) as info:
        fit_from_embeddings(*pairs(20), cfg, public_differences=public())
    err = info.value
    message = str(err)
    assert f"n~={err.noisy_count:.0f}" in message and "epsilon=0.5" in message
    for advice in ("Collect more records", "raise epsilon", "fewer clusters"):
        assert advice in message
    assert err.epsilon == 0.5 and err.required > 0
    # Only the Laplace count was spent, and the error says so for the lifetime budget.
    assert err.spent_epsilon == pytest.approx(cfg.count_epsilon_fraction * 0.5)
    assert err.spent_delta == 0.0
    assert "epsilon=0.01" in message


@pytest.mark.parametrize("seed", range(5))
def test_a_demo_sized_dataset_is_not_refused(seed):
    """300 records at epsilon 4 (the demo's setting), whatever the count's noise."""
    cfg = FitConfig(epsilon=4.0, insecure_seed=seed)
    model = fit_from_embeddings(*pairs(300, seed), cfg, public_differences=public())
    assert model.privacy_report["total"]["epsilon"] <= 4.0 * (1 + 1e-9)


def test_fixed_delta_decides_from_the_noisy_histogram():
    """No count is released with a fixed delta: the histogram's noisy total decides."""
    cfg = FitConfig(epsilon=0.5, delta=1e-6, projection="none", insecure_seed=0)
    with pytest.raises(DatasetTooSmallError) as info:
        fit_from_embeddings(*pairs(20), cfg)
    assert "noisy cluster sizes" in str(info.value)
    assert "count_epsilon_fraction" not in str(info.value)
    assert info.value.spent_delta == 1e-6  # the histogram is a Gaussian release
    fit_from_embeddings(*pairs(2000), cfg)  # a large one passes


def _ledger(count_epsilon: float) -> PrivacyLedger:
    ledger = PrivacyLedger(epsilon=1.0, delta=1e-5)
    ledger.spend(Release("count", "laplace", epsilon=count_epsilon, params={"sensitivity": 1.0}))
    return ledger


def test_the_rule_trusts_the_count_only_as_far_as_its_noise_allows():
    """Pass exactly when the lower confidence bound n~ - margin reaches the highest floor."""
    eps_count = 0.1
    margin = math.log(1 / (2 * (1 - CONFIDENCE))) / eps_count
    floors = [SizeFloor(40.0, "a"), SizeFloor(100.0, "the highest")]
    cfg = FitConfig(epsilon=1.0)
    check_dataset_size(NoisyCount.laplace(100 + margin, eps_count), floors, cfg, _ledger(0.1))
    with pytest.raises(DatasetTooSmallError, match="the highest"):
        check_dataset_size(
            NoisyCount.laplace(100 + margin - 1, eps_count), floors, cfg, _ledger(0.1)
        )


def test_the_decision_never_reads_the_exact_count(monkeypatch):
    """The same noisy count gives the same decision whatever the true size."""
    import dpprefsyn.private.fit as fit_mod

    def fake_count(n, *, epsilon, rng):
        return 500.0, Release("count", "laplace", epsilon=epsilon, params={"sensitivity": 1.0})

    monkeypatch.setattr(fit_mod, "dp_count", fake_count)
    cfg = FitConfig(epsilon=1.0, insecure_seed=0, n_components=8)
    fit_from_embeddings(*pairs(15), cfg, public_differences=public())  # tiny, but n~ = 500

    def tiny_count(n, *, epsilon, rng):
        return 3.0, Release("count", "laplace", epsilon=epsilon, params={"sensitivity": 1.0})

    monkeypatch.setattr(fit_mod, "dp_count", tiny_count)
    with pytest.raises(DatasetTooSmallError, match="n~=3 "):
        fit_from_embeddings(*pairs(5000), cfg, public_differences=public())  # large, n~ = 3
