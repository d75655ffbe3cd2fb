"""Per-cluster rewards: DPMeanReward and DPSGDReward."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from spy_rng import SpyGenerator

import dpprefsyn.dp.reward as reward_module
from dpprefsyn.dp import DPMeanReward, DPSGDReward
from dpprefsyn.dp._validation import normalize_rows
from dpprefsyn.errors import BudgetError, PrivacyLeakWarning
from dpprefsyn.privacy import PrivacyLedger
from dpprefsyn.privacy.analysis import gaussian_mu

P = 5
DIRS = np.eye(P)[:2]  # planted preference direction of cluster 0 and of cluster 1


def planted(per: int, seed: int = 0, signal: float = 0.8):
    """Unit preference vectors leaning toward each cluster's direction; (z, groups)."""
    rng = np.random.default_rng(seed)
    groups = np.repeat([0, 1], per)
    z = normalize_rows(signal * DIRS[groups] + 0.5 * rng.normal(size=(2 * per, P)))
    return z, groups


def cosines(coef: np.ndarray) -> np.ndarray:
    """Cosine of each cluster's reward with its own planted direction."""
    return np.sum(coef * DIRS, axis=1) / np.linalg.norm(coef, axis=1)


@pytest.fixture(scope="module")
def data():
    """Two planted clusters of 300 rows, with noisy counts."""
    z, groups = planted(per=300)
    return z, groups, np.array([290.0, 312.0])  # noisy counts, as from DPHistogram


# --- DPMeanReward --------------------------------------------------------------------


def test_mean_fit_returns_self_and_sets_attributes(data) -> None:
    """``fit`` returns self; coef_ has one row per cluster; decision_function scores each."""
    z, groups, counts = data
    est = DPMeanReward(epsilon=1.0, random_state=0)
    assert est.fit(z, groups, counts) is est
    assert est.coef_.shape == (2, P)
    assert est.epsilon_spent_ == 1.0
    assert est.decision_function(z).shape == (len(z), 2)


def test_mean_decision_function_before_fit_raises() -> None:
    """``decision_function`` on an unfitted estimator raises NotFittedError."""
    with pytest.raises(NotFittedError):
        DPMeanReward().decision_function(np.ones((2, P)))


@pytest.mark.parametrize(
    ("kwargs", "mangle"),
    [
        ({"epsilon": 0.0}, None),
        ({"epsilon": -1.0}, None),
        ({"delta": 0.0}, None),
        ({"delta": 1.0}, None),
        ({}, "short_groups"),
        ({}, "group_out_of_range"),
        ({}, "nan_row"),
    ],
)
def test_mean_bad_params_rejected(data, kwargs, mangle) -> None:
    """Bad epsilon/delta, misaligned or out-of-range groups and NaN rows raise ValueError."""
    z, groups, counts = data[0].copy(), data[1].copy(), data[2]
    if mangle == "short_groups":
        groups = groups[:-1]
    elif mangle == "group_out_of_range":
        groups[0] = 2
    elif mangle == "nan_row":
        z[3, 0] = np.nan
    with pytest.raises(ValueError):
        DPMeanReward(**kwargs).fit(z, groups, counts)


def test_mean_zero_clip_rejected(data) -> None:
    """clip=0 releases nothing useful and should be an error, not a silent zero reward."""
    with pytest.raises(ValueError):
        DPMeanReward(clip=0.0, random_state=0).fit(*data)


def test_mean_ledger_spend_equals_epsilon(data) -> None:
    """One Gaussian release (both clusters in parallel) costing epsilon."""
    ledger = PrivacyLedger(epsilon=3.0, delta=1e-5)
    DPMeanReward(epsilon=0.9, delta=1e-5, clip=0.5, random_state=0, ledger=ledger).fit(*data)
    (release,) = ledger.history
    assert release.mechanism == "gaussian" and release.params["sensitivity"] == 0.5
    assert release.params["noise_std"] == pytest.approx(0.5 / gaussian_mu(0.9, 1e-5))
    assert ledger.total() == pytest.approx(0.9, rel=1e-6)


def test_mean_noise_drawn_has_std_clip_over_mu(data) -> None:
    """The one Gaussian draw on the cluster sums has std clip / mu(epsilon, delta)."""
    spy = SpyGenerator(0)
    DPMeanReward(epsilon=0.9, delta=1e-6, clip=0.4, random_state=spy).fit(*data)
    assert spy.scales == [pytest.approx(0.4 / gaussian_mu(0.9, 1e-6))]


def test_mean_over_budget_raises_before_release(data) -> None:
    """BudgetError: nothing recorded, no reward released."""
    ledger = PrivacyLedger(epsilon=0.1, delta=1e-5)
    est = DPMeanReward(epsilon=1.0, ledger=ledger)
    with pytest.raises(BudgetError):
        est.fit(*data)
    assert len(ledger) == 0 and not hasattr(est, "coef_")


def test_mean_rows_are_clipped(data) -> None:
    """The clip bound is always set and enforced: rows beyond it count as if at it; no warning."""
    z, groups, counts = data
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        a = DPMeanReward(clip=1.0, random_state=2).fit(z, groups, counts).coef_
        b = DPMeanReward(clip=1.0, random_state=2).fit(50.0 * z, groups, counts).coef_
    np.testing.assert_allclose(a, b, atol=1e-10)


def test_mean_fixed_seed_repeats(data) -> None:
    """The same seed gives identical rewards; another seed gives others."""

    def fit(seed):
        return DPMeanReward(epsilon=1.0, random_state=seed).fit(*data).coef_

    np.testing.assert_array_equal(fit(1), fit(1))
    assert not np.allclose(fit(1), fit(2))


def test_mean_large_epsilon_points_along_planted_direction(data) -> None:
    """At large epsilon each cluster's reward has cosine > 0.9 with its planted direction."""
    coef = DPMeanReward(epsilon=1e3, random_state=0).fit(*data).coef_
    assert np.all(cosines(coef) > 0.9)


def test_mean_small_epsilon_is_noisier(data) -> None:
    """At tiny epsilon the direction is lost in noise (the noise is real)."""
    coef = DPMeanReward(epsilon=0.005, random_state=0).fit(*data).coef_
    assert np.min(cosines(coef)) < 0.9


@pytest.mark.parametrize("clip", [0.3, 1.0])
def test_mean_sensitivity_of_one_removal_is_clip(clip) -> None:
    """Removing any one row moves the noiseless cluster sum by at most clip (same noise)."""
    rng = np.random.default_rng(5)
    z = rng.normal(size=(30, P)) * rng.uniform(0.01, 20.0, size=(30, 1))
    groups = rng.integers(0, 2, size=30)
    counts = np.array([15.0, 15.0])
    scale = 2 * P / counts[:, None]  # coef_ = 2p * (sum + noise) / noisy count

    def sums(keep):
        est = DPMeanReward(epsilon=1.0, clip=clip, random_state=9)
        return est.fit(z[keep], groups[keep], counts).coef_ / scale

    full = sums(np.ones(30, bool))
    shifts = []
    for i in range(30):
        keep = np.ones(30, bool)
        keep[i] = False
        diff = full - sums(keep)
        assert np.count_nonzero(np.linalg.norm(diff, axis=1) > 1e-9) <= 1  # one cluster only
        shifts.append(np.linalg.norm(diff))
    assert max(shifts) <= clip * (1 + 1e-9)
    assert max(shifts) == pytest.approx(clip)  # rows above the bound reach it exactly


# --- DPSGDReward ---------------------------------------------------------------------
# Calibration runs the PRV accountant ~12 times; the fits below share one plan (equal noisy
# counts), and the pure accounting functions are memoised so repeated fits cost nothing.

SGD_KW = {"epsilon": 4.0, "delta": 1e-5, "lr": 0.5, "epochs": 2.0, "batch_size": 4}
SGD_COUNTS = np.array([50.0, 50.0])


@pytest.fixture(scope="module", autouse=True)
def memoised_accounting():
    """Cache calibrate/epsilon (pure functions of their arguments) for this module."""
    calibrate = functools.cache(reward_module.calibrate_subsampled_gaussian)
    epsilon = functools.cache(reward_module.subsampled_gaussian_epsilon)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            reward_module,
            "calibrate_subsampled_gaussian",
            lambda eps, delta, plans: calibrate(eps, delta, tuple(plans)),
        )
        mp.setattr(reward_module, "subsampled_gaussian_epsilon", epsilon)
        yield


@pytest.fixture(scope="module")
def sgd_data():
    """Two small planted clusters whose noisy counts are equal (one calibration plan)."""
    z, groups = planted(per=50, seed=1)
    groups[:2] = 1  # exact sizes 48 and 52, noisy counts 50 and 50
    return z, groups


@pytest.fixture(scope="module")
def sgd_fit(sgd_data):
    """One DP-SGD fit shared by the tests: (estimator, what fit returned, ledger)."""
    ledger = PrivacyLedger(epsilon=10.0, delta=1e-4)
    est = DPSGDReward(**SGD_KW, random_state=0, ledger=ledger)
    returned = est.fit(*sgd_data, SGD_COUNTS)
    return est, returned, ledger


def test_sgd_fit_returns_self_and_sets_attributes(sgd_fit, sgd_data) -> None:
    """``fit`` returns self; rates and steps come from the noisy counts, never the exact sizes."""
    est, returned, _ = sgd_fit
    assert returned is est
    assert est.coef_.shape == (2, P)
    np.testing.assert_allclose(est.sample_rates_, 4 / SGD_COUNTS)
    np.testing.assert_array_equal(est.steps_, [25, 25])
    assert est.noise_multiplier_ > 0
    assert est.decision_function(sgd_data[0]).shape == (len(sgd_data[0]), 2)


def test_sgd_decision_function_before_fit_raises() -> None:
    """``decision_function`` on an unfitted estimator raises NotFittedError."""
    with pytest.raises(NotFittedError):
        DPSGDReward().decision_function(np.ones((2, P)))


def test_sgd_ledger_spend_is_the_calibrated_epsilon(sgd_fit) -> None:
    """One release per cluster in a parallel group; the ledger pays the worst, <= epsilon."""
    est, _, ledger = sgd_fit
    assert len(ledger) == 2
    groups = {r.group for r in ledger.history}
    assert len(groups) == 1 and next(iter(groups)).startswith("reward-clusters")
    assert all(r.mechanism == "subsampled_gaussian" for r in ledger.history)
    assert [r.params["cluster"] for r in ledger.history] == [0, 1]
    assert all(r.params["noise_multiplier"] == est.noise_multiplier_ for r in ledger.history)
    assert ledger.total() == pytest.approx(est.epsilon_spent_)
    assert 0.95 * SGD_KW["epsilon"] <= est.epsilon_spent_ <= SGD_KW["epsilon"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0},
        {"delta": 0.0},
        {"delta": 1.0},
        {"epochs": 0.0},
        {"lr": 0.0},
        {"clip": 0.0},
    ],
)
def test_sgd_bad_params_rejected(sgd_data, kwargs) -> None:
    """Bad epsilon/delta, no steps, non-positive lr or clip raise ValueError; nothing spent."""
    ledger = PrivacyLedger(epsilon=10.0, delta=1e-4)
    with pytest.raises(ValueError):
        DPSGDReward(**{**SGD_KW, **kwargs}, ledger=ledger).fit(*sgd_data, SGD_COUNTS)
    assert len(ledger) == 0


def test_sgd_over_budget_raises_before_training(sgd_data) -> None:
    """BudgetError: nothing recorded, no reward released."""
    ledger = PrivacyLedger(epsilon=1.0, delta=1e-4)
    est = DPSGDReward(**SGD_KW, ledger=ledger)
    with pytest.raises(BudgetError):
        est.fit(*sgd_data, SGD_COUNTS)
    assert len(ledger) == 0 and not hasattr(est, "coef_")


def test_sgd_fixed_seed_repeats(sgd_fit, sgd_data) -> None:
    """The same seed gives identical rewards; another seed gives others."""
    est, _, _ = sgd_fit
    again = DPSGDReward(**SGD_KW, random_state=0).fit(*sgd_data, SGD_COUNTS)
    other = DPSGDReward(**SGD_KW, random_state=1).fit(*sgd_data, SGD_COUNTS)
    np.testing.assert_array_equal(again.coef_, est.coef_)
    assert not np.allclose(other.coef_, est.coef_)


def test_sgd_rows_are_clipped(sgd_data) -> None:
    """Per-example gradients are clipped: 100x longer rows move theta 2x, not 100x.

    With a tiny lr, theta stays near 0, where an unclipped gradient is z/2: norm 0.5 for unit
    rows, 50 for 100x rows, clipped to 1. Zero rows give the noise alone (same seed, same
    batches), which is subtracted to leave the gradient part.
    """
    z, groups = sgd_data

    def fit(rows):
        kw = {**SGD_KW, "lr": 1e-6}
        return DPSGDReward(**kw, random_state=3).fit(rows, groups, SGD_COUNTS).coef_

    noise = fit(np.zeros_like(z))
    ratio = np.linalg.norm(fit(100 * z) - noise) / np.linalg.norm(fit(z) - noise)
    assert ratio == pytest.approx(2.0, rel=0.05)


def test_sgd_learns_planted_direction(sgd_fit) -> None:
    """At epsilon 4 the DP-SGD reward leans toward each cluster's direction."""
    assert np.all(cosines(sgd_fit[0].coef_) > 0.8)


def test_sgd_two_fits_on_one_ledger_both_pay(sgd_data) -> None:
    """Refitting on the same clusters is new spending: the ledger total must grow."""
    ledger = PrivacyLedger(epsilon=20.0, delta=1e-4)
    DPSGDReward(**SGD_KW, random_state=0, ledger=ledger).fit(*sgd_data, SGD_COUNTS)
    once = ledger.total()
    DPSGDReward(**SGD_KW, random_state=1, ledger=ledger).fit(*sgd_data, SGD_COUNTS)
    assert ledger.total() > 1.5 * once
