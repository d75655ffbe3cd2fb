"""DP clustering of preference directions: a Gaussian spherical k-means, and diffprivlib's."""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils.validation import check_is_fitted

from dpprefsyn.dp._validation import check_budget, check_matrix, normalize_rows
from dpprefsyn.errors import PrivacyLeakWarning
from dpprefsyn.privacy import PrivacyLedger, Release
from dpprefsyn.privacy.analysis import gaussian_mu


class DPSphericalKMeans(ClusterMixin, BaseEstimator):
    """Spherical k-means on unit rows with Gaussian-noised Lloyd steps.

    Parameters
    ----------
    n_clusters : int, default=5
    epsilon, delta : float
        Standalone guarantee of all iterations together.
    n_iter : int, default=5
        Lloyd iterations; each one is a release, so more iterations mean more noise each.
    sign_invariant : bool, default=False
        Cluster axes instead of directions: a row and its negation fall in the same cluster
        (``|cos|`` assignment, rows flipped toward their centre before averaging). Signed
        clustering of chosen-minus-rejected differences mostly separates which response came
        first, not preference types.
    random_state : int, numpy.random.Generator or None
    ledger : PrivacyLedger or None

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        Unit-norm noisy centres (an initial random direction when a cluster stays empty).
    labels_ : ndarray of shape (n_samples,)
        Assignment of each training row to the final centres (private: never released).

    Privacy
    -------
    Centres start from random directions (no data). Each iteration releases, per cluster, the
    sum of its rows and its count with Gaussian noise of the same std. Adding or removing one
    unit row changes one sum by at most 1 and one count by 1: L2 sensitivity ``sqrt(2)``.
    Iterations compose as GDP: each gets ``mu / sqrt(n_iter)``.
    """

    def __init__(
        self,
        n_clusters: int = 5,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        n_iter: int = 5,
        sign_invariant: bool = False,
        random_state: int | np.random.Generator | None = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.delta = delta
        self.n_iter = n_iter
        self.sign_invariant = sign_invariant
        self.random_state = random_state
        self.ledger = ledger

    def fit(self, X: np.ndarray, y: None = None) -> DPSphericalKMeans:
        X = normalize_rows(check_matrix(X))
        check_budget(self.epsilon, self.delta, "DPSphericalKMeans")
        if self.n_clusters < 1 or self.n_iter < 1:
            raise ValueError("n_clusters and n_iter must be at least 1")
        mu = gaussian_mu(self.epsilon, self.delta)
        noise_std = math.sqrt(2.0) * math.sqrt(self.n_iter) / mu
        release = Release(
            "cluster",
            "gaussian",
            epsilon=self.epsilon,
            delta=self.delta,
            mu=mu,
            params={
                "algorithm": "spherical k-means, Gaussian Lloyd steps",
                "n_iter": self.n_iter,
                "sensitivity_per_iter": math.sqrt(2.0),
                "noise_std": noise_std,
                "sign_invariant": self.sign_invariant,
            },
        )
        if self.ledger is not None:
            self.ledger.check(release)
        rng = np.random.default_rng(self.random_state)
        k, d = self.n_clusters, X.shape[1]
        centers = normalize_rows(rng.normal(size=(k, d)))
        for _ in range(self.n_iter):
            labels, signs = self._assign(X, centers)
            sums = np.zeros((k, d))
            np.add.at(sums, labels, X * signs[:, None])
            counts = np.bincount(labels, minlength=k).astype(float)
            sums += rng.normal(0.0, noise_std, size=(k, d))
            counts += rng.normal(0.0, noise_std, size=k)
            # Scale does not matter for unit-norm centres; the noisy count only guards the sign.
            new = normalize_rows(sums / np.maximum(counts, 1.0)[:, None])
            empty = ~np.any(new, axis=1)
            new[empty] = centers[empty]
            centers = new
        self.cluster_centers_ = centers
        self.labels_ = self._assign(X, centers)[0]
        self.epsilon_spent_ = self.epsilon
        if self.ledger is not None:
            self.ledger.spend(release)
        return self

    def _assign(self, X: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sims = X @ centers.T
        if self.sign_invariant:
            labels = np.abs(sims).argmax(axis=1)
            signs = np.where(sims[np.arange(len(X)), labels] < 0, -1.0, 1.0)
        else:
            labels = sims.argmax(axis=1)
            signs = np.ones(len(X))
        return labels, signs

    def predict(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self)
        return self._assign(normalize_rows(check_matrix(X)), self.cluster_centers_)[0]


class DiffprivlibKMeans(ClusterMixin, BaseEstimator):
    """diffprivlib's DP k-means (the research code's choice), with our ledger.

    Parameters
    ----------
    n_clusters : int, default=5
    epsilon : float
    bounds : tuple of float or None, default=(-0.5, 0.5)
        Per-feature bounds, public; the research configuration uses +/-0.5. ``None`` takes the
        data's range, which leaks it: a :class:`PrivacyLeakWarning` is emitted.
    random_state : int or None
    ledger : PrivacyLedger or None

    Privacy
    -------
    Pure epsilon-DP by diffprivlib's Laplace noise on sums and counts (Su et al. 2016), with
    data clipped to ``bounds``; recorded as a pure release that composes by basic composition.
    """

    def __init__(
        self,
        n_clusters: int = 5,
        *,
        epsilon: float = 1.0,
        bounds: tuple[float, float] | None = (-0.5, 0.5),
        random_state: int | None = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.random_state = random_state
        self.ledger = ledger

    def fit(self, X: np.ndarray, y: None = None) -> DiffprivlibKMeans:
        from diffprivlib.models import KMeans

        X = check_matrix(X)
        if self.bounds is None:
            warnings.warn(
                "bounds not set: using the data's range, which leaks it",
                PrivacyLeakWarning,
                stacklevel=2,
            )
            lo, hi = float(X.min()), float(X.max())
        else:
            lo, hi = self.bounds
        if not lo < hi:
            raise ValueError(f"bounds must satisfy lower < upper, got ({lo}, {hi})")
        self.bounds_ = (lo, hi)
        release = Release(
            "cluster",
            "pure",
            epsilon=self.epsilon,
            params={"algorithm": "diffprivlib.models.KMeans", "bounds": [lo, hi]},
        )
        if self.ledger is not None:
            self.ledger.check(release)
        d = X.shape[1]
        model = KMeans(
            n_clusters=self.n_clusters,
            epsilon=self.epsilon,
            bounds=(np.full(d, lo), np.full(d, hi)),
            random_state=self.random_state,
        )
        model.fit(np.clip(X, lo, hi))
        self.cluster_centers_ = model.cluster_centers_
        self.labels_ = self.predict(X)
        self.epsilon_spent_ = self.epsilon
        if self.ledger is not None:
            self.ledger.spend(release)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self)
        X = check_matrix(X)
        d2 = ((X[:, None, :] - self.cluster_centers_[None]) ** 2).sum(-1)
        return d2.argmin(axis=1)
