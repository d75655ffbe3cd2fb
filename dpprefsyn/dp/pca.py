"""DP-PCA by a Gaussian-noised second-moment matrix ("Analyze Gauss")."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dpprefsyn.dp._validation import check_budget, check_matrix, clip_rows
from dpprefsyn.errors import PrivacyLeakWarning
from dpprefsyn.privacy import PrivacyLedger, Release
from dpprefsyn.privacy.analysis import gaussian_mu


class DPPCA(TransformerMixin, BaseEstimator):
    """Uncentred principal directions of private rows under (epsilon, delta)-DP.

    Uncentred, because the rows are differences of two responses' embeddings: the reward is
    linear, so the directions that separate responses matter, not the spread around a mean.

    Parameters
    ----------
    n_components : int
        Number of directions kept.
    epsilon, delta : float
        Standalone guarantee of this release.
    row_norm_bound : float or None, default=None
        Rows are clipped to this L2 norm. ``None`` takes the largest row norm of the data,
        which leaks it: a :class:`PrivacyLeakWarning` is emitted.
    random_state : int, numpy.random.Generator or None
        Noise source; ``None`` draws a seed from the OS.
    ledger : PrivacyLedger or None
        Checked before and charged after the fit.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
    noise_std_ : float
    row_norm_bound_ : float
    epsilon_spent_ : float

    Privacy
    -------
    Gaussian mechanism on the upper triangle of ``X.T @ X``. Adding or removing one row ``x``
    with ``||x|| <= R`` changes it by ``x x^T``, Frobenius norm ``<= R**2``; noise std is
    ``R**2 / mu`` with ``mu = gaussian_mu(epsilon, delta)`` (Dwork, Talwar, Thakurta and
    Zhang 2014). The eigen-decomposition is post-processing.
    """

    def __init__(
        self,
        n_components: int = 20,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        row_norm_bound: float | None = None,
        random_state: int | np.random.Generator | None = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.row_norm_bound = row_norm_bound
        self.random_state = random_state
        self.ledger = ledger

    def fit(self, X: np.ndarray, y: None = None) -> DPPCA:
        X = check_matrix(X)
        check_budget(self.epsilon, self.delta, "DPPCA")
        d = X.shape[1]
        if not 1 <= self.n_components <= d:
            raise ValueError(f"n_components must be in [1, {d}], got {self.n_components}")
        bound = self.row_norm_bound
        if bound is not None and not bound > 0:
            raise ValueError(f"row_norm_bound must be positive, got {bound}")
        if bound is None:
            warnings.warn(
                "row_norm_bound not set: using the data's largest row norm, which leaks it",
                PrivacyLeakWarning,
                stacklevel=2,
            )
            bound = float(np.linalg.norm(X, axis=1).max()) or 1.0
        mu = gaussian_mu(self.epsilon, self.delta)
        release = Release(
            "pca",
            "gaussian",
            epsilon=self.epsilon,
            delta=self.delta,
            mu=mu,
            params={"sensitivity": bound**2, "noise_std": bound**2 / mu, "dims": d},
        )
        if self.ledger is not None:
            self.ledger.check(release)
        rng = np.random.default_rng(self.random_state)
        Xc = clip_rows(X, bound)
        noise = np.triu(rng.normal(0.0, bound**2 / mu, size=(d, d)))
        cov = Xc.T @ Xc + noise + np.triu(noise, 1).T
        eigvals, eigvecs = np.linalg.eigh(cov)
        order = np.argsort(eigvals)[::-1][: self.n_components]
        self.components_ = eigvecs[:, order].T
        self.explained_variance_ = eigvals[order]
        self.noise_std_ = bound**2 / mu
        self.row_norm_bound_ = bound
        self.epsilon_spent_ = self.epsilon
        if self.ledger is not None:
            self.ledger.spend(release)
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self)
        return check_matrix(X) @ self.components_.T
