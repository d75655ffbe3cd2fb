"""DPPCA: estimator habits, subspace recovery, and a diffprivlib cross-check."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.linalg import subspace_angles
from sklearn.exceptions import NotFittedError
from spy_rng import SpyGenerator

from dpprefsyn.dp import DPPCA
from dpprefsyn.errors import BudgetError, PrivacyLeakWarning
from dpprefsyn.privacy import PrivacyLedger
from dpprefsyn.privacy.analysis import gaussian_mu


def planted(n: int = 2000, d: int = 20, rank: int = 3, seed: int = 0):
    """Rows near a random rank-``rank`` subspace, norms <= 1; returns (X, orthonormal basis)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(d, rank)))[0]  # (d, rank)
    coef = rng.normal(size=(n, rank)) * np.array([3.0, 2.0, 1.5])[:rank]
    X = coef @ basis.T + 0.05 * rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True).max()
    return X, basis


@pytest.fixture(scope="module")
def data():
    """Planted rank-3 rows in R^20."""
    return planted()


def test_fit_returns_self_and_sets_attributes(data) -> None:
    """``fit`` returns self and sets components_, noise_std_, row_norm_bound_, epsilon_spent_."""
    X, _ = data
    est = DPPCA(3, epsilon=1.0, delta=1e-5, row_norm_bound=1.0, random_state=0)
    assert est.fit(X) is est
    assert est.components_.shape == (3, X.shape[1])
    np.testing.assert_allclose(est.components_ @ est.components_.T, np.eye(3), atol=1e-10)
    assert est.noise_std_ == pytest.approx(1.0 / gaussian_mu(1.0, 1e-5))
    assert est.row_norm_bound_ == 1.0
    assert est.epsilon_spent_ == 1.0
    assert est.transform(X).shape == (len(X), 3)


def test_transform_before_fit_raises() -> None:
    """``transform`` on an unfitted estimator raises NotFittedError."""
    with pytest.raises(NotFittedError):
        DPPCA(2, row_norm_bound=1.0).transform(np.ones((3, 4)))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_components": 0},
        {"n_components": 21},
        {"epsilon": 0.0},
        {"epsilon": -1.0},
        {"epsilon": np.inf},
        {"delta": 0.0},
        {"delta": 1.0},
    ],
)
def test_bad_params_rejected(data, kwargs) -> None:
    """Out-of-range n_components, epsilon or delta raise ValueError at fit."""
    X, _ = data
    params = {"n_components": 2, "epsilon": 1.0, "delta": 1e-5, "row_norm_bound": 1.0, **kwargs}
    with pytest.raises(ValueError):
        DPPCA(**params).fit(X)


@pytest.mark.parametrize(
    "X", [np.ones(5), np.ones((0, 3)), np.array([[1.0, np.nan], [0.0, 1.0]])], ids=str
)
def test_bad_data_rejected(X) -> None:
    """1-D, empty and non-finite inputs are rejected (the message names a row, not values)."""
    with pytest.raises(ValueError):
        DPPCA(1, row_norm_bound=1.0).fit(X)


@pytest.mark.parametrize("bound", [0.0, -1.0])
def test_non_positive_bound_rejected(data, bound) -> None:
    """A non-positive row_norm_bound is meaningless and should be an error."""
    with pytest.raises(ValueError):
        DPPCA(2, row_norm_bound=bound, random_state=0).fit(data[0])


def test_ledger_spend_equals_epsilon(data) -> None:
    """One Gaussian release of mu(epsilon, delta) is recorded; the ledger total is epsilon."""
    ledger = PrivacyLedger(epsilon=5.0, delta=1e-5)
    DPPCA(2, epsilon=0.7, delta=1e-5, row_norm_bound=1.0, random_state=0, ledger=ledger).fit(
        data[0]
    )
    (release,) = ledger.history
    assert release.stage == "pca" and release.mechanism == "gaussian"
    assert release.epsilon == 0.7
    assert release.mu == pytest.approx(gaussian_mu(0.7, 1e-5))
    assert ledger.total() == pytest.approx(0.7, rel=1e-6)


def test_noise_drawn_has_std_r_squared_over_mu(data) -> None:
    """The one Gaussian draw (d x d, symmetrised) has std R^2 / mu(epsilon, delta)."""
    spy = SpyGenerator(0)
    DPPCA(2, epsilon=0.6, delta=1e-6, row_norm_bound=0.5, random_state=spy).fit(data[0])
    assert spy.scales == [pytest.approx(0.25 / gaussian_mu(0.6, 1e-6))]


def test_over_budget_fit_raises_before_release(data) -> None:
    """A fit that would exceed the ledger raises BudgetError, records and releases nothing."""
    ledger = PrivacyLedger(epsilon=0.5, delta=1e-5)
    est = DPPCA(2, epsilon=1.0, delta=1e-5, row_norm_bound=1.0, ledger=ledger)
    with pytest.raises(BudgetError):
        est.fit(data[0])
    assert len(ledger) == 0
    assert not hasattr(est, "components_")


def test_missing_bound_warns_and_keeps_param(data) -> None:
    """No row_norm_bound: PrivacyLeakWarning, data max norm in row_norm_bound_, param untouched."""
    X, _ = data
    est = DPPCA(2, epsilon=1.0, random_state=0)
    with pytest.warns(PrivacyLeakWarning, match="row_norm_bound"):
        est.fit(X * 3.0)
    assert est.row_norm_bound is None
    assert est.row_norm_bound_ == pytest.approx(3.0 * np.linalg.norm(X, axis=1).max())
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        DPPCA(2, epsilon=1.0, row_norm_bound=1.0, random_state=0).fit(X)


def test_fixed_seed_repeats(data) -> None:
    """The same integer seed gives identical components; another seed gives others."""
    X, _ = data

    def fit(seed):
        return DPPCA(3, epsilon=0.5, row_norm_bound=1.0, random_state=seed).fit(X).components_

    np.testing.assert_array_equal(fit(7), fit(7))
    assert not np.allclose(np.abs(fit(7)), np.abs(fit(8)))


def test_rows_are_clipped_to_the_bound(data) -> None:
    """Scaling rows above the bound changes nothing: each row contributes at most R^2."""
    X, _ = data
    X = X / np.linalg.norm(X, axis=1, keepdims=True)  # every row exactly at the bound

    def fit(A):
        return DPPCA(3, epsilon=1.0, row_norm_bound=1.0, random_state=3).fit(A).components_

    np.testing.assert_allclose(fit(X), fit(1000.0 * X), atol=1e-8)


def test_large_epsilon_recovers_planted_subspace(data) -> None:
    """At huge epsilon the top-3 subspace of a planted rank-3 matrix is found (angles < 0.05)."""
    X, basis = data
    est = DPPCA(3, epsilon=1e4, delta=1e-5, row_norm_bound=1.0, random_state=0).fit(X)
    assert np.max(subspace_angles(est.components_.T, basis)) < 0.05


def test_small_epsilon_is_noisier(data) -> None:
    """Recovery degrades as epsilon falls (the noise is real)."""
    X, basis = data
    angle = {
        eps: np.max(
            subspace_angles(
                DPPCA(3, epsilon=eps, row_norm_bound=1.0, random_state=0).fit(X).components_.T,
                basis,
            )
        )
        for eps in (1e4, 0.01)
    }
    assert angle[0.01] > 5 * angle[1e4]


def test_agrees_with_diffprivlib_pca() -> None:
    """Both DPPCA and diffprivlib's PCA recover a planted direction at large epsilon (d = 6)."""
    from diffprivlib.models import PCA

    rng = np.random.default_rng(1)
    d, n = 6, 3000
    v = rng.normal(size=d)
    v /= np.linalg.norm(v)
    X = rng.normal(size=(n, 1)) * v + 0.05 * rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1).max()
    ours = DPPCA(1, epsilon=1e3, row_norm_bound=1.0, random_state=0).fit(X).components_[0]
    theirs = PCA(n_components=1, epsilon=1e3, data_norm=1.0, centered=True, random_state=0)
    theirs = theirs.fit(X).components_[0]
    assert abs(ours @ v) > 0.99
    assert abs(theirs @ v) > 0.99
    assert abs(ours @ theirs) > 0.98
