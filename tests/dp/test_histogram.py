"""DPHistogram and dp_count: estimator habits and the noise actually drawn."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.exceptions import NotFittedError

from dpprefsyn.dp import DPHistogram
from dpprefsyn.dp.histogram import dp_count
from dpprefsyn.errors import BudgetError
from dpprefsyn.privacy import PrivacyLedger
from dpprefsyn.privacy.analysis import gaussian_mu

LABELS = np.array([0, 0, 1, 1, 1, 3, 3, 3, 3])  # bin 2 and bin 4 are empty
EXACT = np.array([2.0, 3.0, 0.0, 4.0, 0.0])


def test_fit_returns_self_and_sets_attributes() -> None:
    """``fit`` returns the estimator; counts_ has one entry per bin; noise_std_ is 1/mu."""
    est = DPHistogram(5, epsilon=1.0, delta=1e-5, random_state=0)
    assert est.fit(LABELS) is est
    assert est.counts_.shape == (5,)
    assert est.noise_std_ == pytest.approx(1.0 / gaussian_mu(1.0, 1e-5))
    assert est.epsilon_spent_ == 1.0


def test_probabilities_before_fit_raises() -> None:
    """``probabilities`` on an unfitted estimator raises NotFittedError."""
    with pytest.raises(NotFittedError):
        DPHistogram(3).probabilities()


@pytest.mark.parametrize(
    ("kwargs", "labels"),
    [
        ({"epsilon": 0.0}, LABELS),
        ({"epsilon": -1.0}, LABELS),
        ({"delta": 0.0}, LABELS),
        ({"delta": 1.5}, LABELS),
        ({}, np.array([0, 5])),
        ({}, np.array([-1, 0])),
        ({}, np.zeros((2, 2), dtype=int)),
    ],
)
def test_bad_params_rejected(kwargs, labels) -> None:
    """Bad epsilon/delta, labels outside [0, n_bins) and non-1-D labels raise ValueError."""
    with pytest.raises(ValueError):
        DPHistogram(5, **kwargs).fit(labels)


def test_ledger_spend_equals_epsilon() -> None:
    """One Gaussian release of sensitivity 1 is recorded and costs epsilon."""
    ledger = PrivacyLedger(epsilon=3.0, delta=1e-5)
    DPHistogram(5, epsilon=0.4, delta=1e-5, random_state=0, ledger=ledger, stage="hist").fit(LABELS)
    (release,) = ledger.history
    assert release.stage == "hist" and release.mechanism == "gaussian"
    assert release.params["sensitivity"] == 1.0
    assert ledger.total() == pytest.approx(0.4, rel=1e-6)


def test_over_budget_fit_raises_before_release() -> None:
    """BudgetError leaves the ledger empty and the estimator unfitted."""
    ledger = PrivacyLedger(epsilon=0.1, delta=1e-5)
    est = DPHistogram(5, epsilon=0.4, ledger=ledger)
    with pytest.raises(BudgetError):
        est.fit(LABELS)
    assert len(ledger) == 0 and not hasattr(est, "counts_")


def test_no_bound_needed() -> None:
    """Sensitivity is 1 whatever the data, so no bound exists to be missing: no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DPHistogram(5, random_state=0).fit(LABELS)


def test_fixed_seed_repeats() -> None:
    """The same seed gives identical counts; another seed gives others."""

    def fit(seed):
        return DPHistogram(5, random_state=seed).fit(LABELS).counts_

    np.testing.assert_array_equal(fit(1), fit(1))
    assert not np.array_equal(fit(1), fit(2))


def test_noise_std_is_one_over_mu_in_every_bin() -> None:
    """Over many fits, empty and occupied bins alike get mean-zero noise of std 1/mu."""
    eps, delta, fits, bins = 0.5, 1e-5, 200, 20
    rng = np.random.default_rng(0)
    exact = np.bincount(LABELS, minlength=bins).astype(float)
    noise = np.array(
        [DPHistogram(bins, epsilon=eps, delta=delta, random_state=rng).fit(LABELS).counts_
         for _ in range(fits)]
    ) - exact  # fmt: skip
    sd = 1.0 / gaussian_mu(eps, delta)
    empty = exact == 0
    assert empty.sum() == 17
    assert noise[:, empty].std() == pytest.approx(sd, rel=0.1)
    assert noise[:, ~empty].std() == pytest.approx(sd, rel=0.1)
    assert abs(noise.mean()) < 4 * sd / np.sqrt(noise.size)
    # Chi-square of the standardised noise over all bins and fits, two-sided at 0.2%.
    chi2 = float(((noise / sd) ** 2).sum())
    assert 1e-3 < stats.chi2.sf(chi2, noise.size) < 1 - 1e-3
    assert chi2 / noise.size == pytest.approx(1.0, rel=0.1)


def test_probabilities_clip_negatives_and_honour_keep() -> None:
    """Probabilities are the clipped noisy counts normalised; dropped bins get zero."""
    est = DPHistogram(3, random_state=0).fit(np.array([0, 1]))
    est.counts_ = np.array([3.0, -1.0, 1.0])
    np.testing.assert_allclose(est.probabilities(), [0.75, 0.0, 0.25])
    np.testing.assert_allclose(est.probabilities(np.array([False, True, True])), [0, 0, 1.0])
    est.counts_ = np.array([-1.0, -2.0, 0.0])
    with pytest.raises(ValueError, match="zero"):
        est.probabilities()


def test_dp_count_is_laplace_with_scale_one_over_epsilon() -> None:
    """dp_count adds Laplace(1/epsilon) noise and returns a pure release of that epsilon."""
    rng = np.random.default_rng(0)
    eps = 0.2
    draws = np.array([dp_count(1000, epsilon=eps, rng=rng)[0] for _ in range(4000)]) - 1000
    # Laplace(b): std = sqrt(2) b, mean |x| = b.
    assert draws.std() == pytest.approx(np.sqrt(2) / eps, rel=0.1)
    assert np.abs(draws).mean() == pytest.approx(1 / eps, rel=0.1)
    _, release = dp_count(10, epsilon=eps, rng=rng)
    assert release.mechanism == "laplace" and release.epsilon == eps and release.delta == 0.0
    with pytest.raises(ValueError):
        dp_count(10, epsilon=0.0, rng=rng)
