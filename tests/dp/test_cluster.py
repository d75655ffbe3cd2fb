"""DP clustering: DPSphericalKMeans and the diffprivlib wrapper."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from spy_rng import SpyGenerator

from dpprefsyn.dp import DiffprivlibKMeans, DPSphericalKMeans
from dpprefsyn.errors import BudgetError, PrivacyLeakWarning
from dpprefsyn.privacy import PrivacyLedger
from dpprefsyn.privacy.analysis import gaussian_mu

D = 10


def planted(per: int = 300, k: int = 3, noise: float = 0.1, seed: int = 0):
    """``per`` rows near each of the first ``k`` axes of R^D; returns (X, directions, truth)."""
    rng = np.random.default_rng(seed)
    dirs = np.eye(D)[:k]
    truth = np.repeat(np.arange(k), per)
    return dirs[truth] + noise * rng.normal(size=(per * k, D)), dirs, truth


@pytest.fixture(scope="module")
def data():
    """Three planted clusters of 300 rows."""
    return planted()


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two labelings are equal up to renaming the clusters."""
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


# --- DPSphericalKMeans ---------------------------------------------------------------


def test_spherical_fit_returns_self_and_sets_attributes(data) -> None:
    """``fit`` returns self; centres are unit rows; labels_ has one entry per row."""
    X, _, _ = data
    km = DPSphericalKMeans(3, epsilon=1.0, random_state=0)
    assert km.fit(X) is km
    assert km.cluster_centers_.shape == (3, D)
    np.testing.assert_allclose(np.linalg.norm(km.cluster_centers_, axis=1), 1.0)
    assert km.labels_.shape == (len(X),)
    assert km.epsilon_spent_ == 1.0
    np.testing.assert_array_equal(km.predict(X), km.labels_)


def test_spherical_predict_before_fit_raises() -> None:
    """``predict`` on an unfitted estimator raises NotFittedError."""
    with pytest.raises(NotFittedError):
        DPSphericalKMeans(2).predict(np.ones((2, 3)))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_clusters": 0},
        {"n_iter": 0},
        {"epsilon": 0.0},
        {"epsilon": np.inf},
        {"delta": 0.0},
        {"delta": 1.0},
    ],
)
def test_spherical_bad_params_rejected(data, kwargs) -> None:
    """Non-positive n_clusters/n_iter and bad epsilon/delta raise ValueError."""
    with pytest.raises(ValueError):
        DPSphericalKMeans(**{"n_clusters": 3, **kwargs}).fit(data[0])


def test_spherical_rejects_non_finite_rows() -> None:
    """A NaN row is rejected before any release."""
    X = np.ones((4, 3))
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match="row 2"):
        DPSphericalKMeans(2).fit(X)


def test_spherical_ledger_spend_equals_epsilon(data) -> None:
    """All iterations together are one Gaussian release costing epsilon."""
    ledger = PrivacyLedger(epsilon=4.0, delta=1e-5)
    DPSphericalKMeans(3, epsilon=0.8, delta=1e-5, n_iter=7, random_state=0, ledger=ledger).fit(
        data[0]
    )
    (release,) = ledger.history
    assert release.stage == "cluster" and release.mechanism == "gaussian"
    assert release.params["n_iter"] == 7
    assert ledger.total() == pytest.approx(0.8, rel=1e-6)


@pytest.mark.parametrize("n_iter", [1, 4])
def test_spherical_noise_composes_to_mu(data, n_iter) -> None:
    """Each Lloyd step noises sums and counts (sensitivity sqrt 2) so the steps compose to mu."""
    spy = SpyGenerator(0)
    DPSphericalKMeans(3, epsilon=0.8, delta=1e-5, n_iter=n_iter, random_state=spy).fit(data[0])
    init, *steps = spy.scales  # the initial centres are drawn from data-free N(0, 1)
    assert init == 1.0 and len(steps) == 2 * n_iter
    per_step_mu = [np.sqrt(2.0) / s for s in steps[::2]]
    assert steps[::2] == steps[1::2]
    assert np.sqrt(np.sum(np.square(per_step_mu))) == pytest.approx(gaussian_mu(0.8, 1e-5))


def test_spherical_over_budget_raises_before_release(data) -> None:
    """BudgetError: nothing recorded, no centres released."""
    ledger = PrivacyLedger(epsilon=0.1, delta=1e-5)
    km = DPSphericalKMeans(3, epsilon=1.0, ledger=ledger)
    with pytest.raises(BudgetError):
        km.fit(data[0])
    assert len(ledger) == 0 and not hasattr(km, "cluster_centers_")


def test_spherical_needs_no_bound(data) -> None:
    """Rows are unit-normalised, so row scale is irrelevant and no leak warning is due."""
    X, _, _ = data
    scales = np.random.default_rng(1).uniform(0.01, 100.0, size=(len(X), 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        a = DPSphericalKMeans(3, epsilon=1.0, random_state=5).fit(X)
        b = DPSphericalKMeans(3, epsilon=1.0, random_state=5).fit(X * scales)
    np.testing.assert_allclose(a.cluster_centers_, b.cluster_centers_, atol=1e-10)


def test_spherical_fixed_seed_repeats(data) -> None:
    """The same seed gives identical centres; another seed gives others."""

    def fit(seed):
        return DPSphericalKMeans(3, epsilon=1.0, random_state=seed).fit(data[0]).cluster_centers_

    np.testing.assert_array_equal(fit(4), fit(4))
    assert not np.allclose(fit(4), fit(5))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spherical_large_epsilon_recovers_planted_directions(data, seed) -> None:
    """At huge epsilon each planted axis gets a centre (cos > 0.99) and clusters are pure.

    Lloyd steps from random directions can still stop in a local optimum for some seeds
    (3 and 7 here merge two axes); that is k-means, not the privacy noise.
    """
    X, dirs, truth = data
    km = DPSphericalKMeans(3, epsilon=1e4, random_state=seed).fit(X)
    assert np.all((km.cluster_centers_ @ dirs.T).max(axis=0) > 0.99)
    assert same_partition(km.labels_, truth)


def test_spherical_small_epsilon_is_noisier(data) -> None:
    """At tiny epsilon the centres no longer find the axes (the noise is real)."""
    X, dirs, _ = data
    km = DPSphericalKMeans(3, epsilon=0.01, random_state=0).fit(X)
    assert (km.cluster_centers_ @ dirs.T).max(axis=0).min() < 0.9


def test_sign_invariant_puts_x_and_minus_x_together() -> None:
    """With sign_invariant, x and -x share a cluster and clusters are axes, not directions."""
    X, dirs, truth = planted(per=200, k=2, seed=3)
    flip = np.random.default_rng(4).choice([-1.0, 1.0], size=(len(X), 1))
    X = X * flip
    km = DPSphericalKMeans(2, epsilon=1e4, sign_invariant=True, random_state=0).fit(X)
    np.testing.assert_array_equal(km.predict(X), km.predict(-X))
    assert same_partition(km.labels_, truth)
    assert np.all(np.abs(km.cluster_centers_ @ dirs.T).max(axis=0) > 0.99)
    signed = DPSphericalKMeans(2, epsilon=1e4, sign_invariant=False, random_state=0).fit(X)
    assert np.any(signed.predict(X) != signed.predict(-X))


# --- DiffprivlibKMeans ---------------------------------------------------------------


@pytest.fixture(scope="module")
def small():
    """Planted clusters scaled into the default bounds (-0.5, 0.5)."""
    X, dirs, truth = planted(per=150)
    return 0.4 * X, dirs, truth


def test_diffprivlib_fit_returns_self_and_records_pure_release(small) -> None:
    """``fit`` returns self and records one pure release whose epsilon is the whole spend."""
    X, _, _ = small
    ledger = PrivacyLedger(epsilon=2.0, delta=1e-5)
    km = DiffprivlibKMeans(3, epsilon=0.5, n_iter=2, random_state=0, ledger=ledger)
    assert km.fit(X) is km
    (release,) = ledger.history
    assert release.mechanism == "pure" and release.delta == 0.0
    assert release.epsilon == 0.5 == km.epsilon_spent_
    assert release.params["bounds"] == [-0.5, 0.5] and release.params["n_iter"] == 2
    assert ledger.total() == pytest.approx(0.5)
    assert km.cluster_centers_.shape == (3, D)
    assert km.labels_.shape == (len(X),)


def test_diffprivlib_predict_before_fit_raises() -> None:
    """``predict`` on an unfitted estimator raises NotFittedError."""
    with pytest.raises(NotFittedError):
        DiffprivlibKMeans(2).predict(np.ones((2, 3)))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": -1.0},
        {"epsilon": 0.0},
        {"n_clusters": 0},
        {"bounds": (0.5, -0.5)},
        {"n_iter": 0},
        {"n_iter": None},  # and no noisy count to set it from
    ],
)
def test_diffprivlib_bad_params_rejected(small, kwargs) -> None:
    """Bad epsilon, clusters, bounds or iterations raise ValueError, as does no iteration count."""
    ledger = PrivacyLedger(epsilon=2.0, delta=1e-5)
    with pytest.raises(ValueError):
        DiffprivlibKMeans(**{"n_clusters": 3, "n_iter": 2, **kwargs}, ledger=ledger).fit(small[0])
    assert len(ledger) == 0


def test_diffprivlib_over_budget_raises_before_release(small) -> None:
    """BudgetError: nothing recorded, no centres released."""
    ledger = PrivacyLedger(epsilon=0.1, delta=1e-5)
    km = DiffprivlibKMeans(3, epsilon=0.5, n_iter=2, ledger=ledger)
    with pytest.raises(BudgetError):
        km.fit(small[0])
    assert len(ledger) == 0 and not hasattr(km, "cluster_centers_")


def test_diffprivlib_missing_bounds_warns(small) -> None:
    """bounds=None should fall back with a PrivacyLeakWarning, as the other estimators do."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DiffprivlibKMeans(3, bounds=None, n_iter=2, random_state=0).fit(small[0])
    assert any(issubclass(w.category, PrivacyLeakWarning) for w in caught)


def test_diffprivlib_fixed_seed_repeats(small) -> None:
    """The same integer seed gives identical centres; another seed gives others."""

    def fit(seed):
        km = DiffprivlibKMeans(3, epsilon=1.0, random_state=seed)
        return km.fit(small[0], noisy_n_samples=450.0).cluster_centers_

    np.testing.assert_array_equal(fit(3), fit(3))
    assert not np.allclose(fit(3), fit(4))


def test_diffprivlib_large_epsilon_finds_the_clusters(small) -> None:
    """At large epsilon diffprivlib's k-means separates the planted clusters."""
    X, _, truth = small
    km = DiffprivlibKMeans(3, epsilon=100.0, n_iter=5, random_state=0).fit(X)
    assert same_partition(km.labels_, truth)
