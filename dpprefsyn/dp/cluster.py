"""DP clustering of preference directions: a Gaussian spherical k-means, and diffprivlib's."""

from __future__ import annotations

import functools
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


def su_iterations(epsilon: float, n_clusters: int, n_dims: int, n_samples: float) -> int:
    """Su et al.'s number of Lloyd iterations, as diffprivlib's ``KMeans._calc_iters`` sets it.

    Between 2 and 7, growing with ``epsilon * n_samples``: more iterations only pay when each
    one's noise is small next to the cluster sums. ``n_samples`` must be public or a DP
    estimate; a noisy count below 1 counts as 1.
    """
    rho = 0.225
    spread = (n_dims + math.cbrt(4 * n_dims * rho**2)) ** 3
    epsilon_m = math.sqrt(500 * n_clusters**3 / max(n_samples, 1.0) ** 2 * spread)
    return int(max(min(epsilon / epsilon_m, 7), 2))


@functools.cache
def _dp_lloyd() -> type:
    """diffprivlib's ``KMeans`` with its privacy bugs fixed (:class:`DiffprivlibKMeans`, Privacy).

    Built on first use: importing diffprivlib takes about half a second.
    """
    from diffprivlib.mechanisms import GeometricFolded, LaplaceBoundedDomain
    from diffprivlib.models import KMeans

    class DPLloyd(KMeans):
        def __init__(
            self,
            n_clusters: int,
            *,
            epsilon: float,
            bounds: tuple[np.ndarray, np.ndarray],
            n_iter: int,
            random_state: int | None,
        ) -> None:
            super().__init__(n_clusters, epsilon=epsilon, bounds=bounds, random_state=random_state)
            self.n_iter = n_iter

        def _calc_iters(self, n_dims: int, n_samples: int) -> int:
            """The ``n_iter`` fixed before fit: diffprivlib's rule reads the exact ``n_samples``."""
            return self.n_iter

        def _update_centers(
            self,
            X: np.ndarray,
            centers: np.ndarray,
            labels: np.ndarray,
            dims: int,
            total_iters: int,
            random_state: np.random.RandomState,
        ) -> np.ndarray:
            """One noisy Lloyd step, diffprivlib's own but for the three fixes in Privacy."""
            # 0.6.6 returns (per-coordinate, count), not the order its docstring and caller use.
            eps_coordinate, eps_count = self._split_epsilon(dims, total_iters)
            count_noise = GeometricFolded(
                epsilon=eps_count,
                sensitivity=1,
                lower=0.5,
                upper=float("inf"),
                random_state=random_state,
            )
            lower, upper = self.bounds
            sensitivity = np.maximum(upper - lower, np.maximum(np.abs(lower), np.abs(upper)))
            for cluster in range(self.n_clusters):
                members = labels == cluster
                count = count_noise.randomise(int(members.sum()))
                sums = X[members].sum(axis=0)
                for i in range(dims):
                    sums[i] = LaplaceBoundedDomain(
                        epsilon=eps_coordinate,
                        sensitivity=sensitivity[i],
                        lower=count * lower[i],
                        upper=count * upper[i],
                        random_state=random_state,
                    ).randomise(sums[i])
                centers[cluster] = sums / count
            return centers

    return DPLloyd


class DiffprivlibKMeans(ClusterMixin, BaseEstimator):
    """diffprivlib's DP k-means (the research code's choice), with our ledger and its bugs fixed.

    Parameters
    ----------
    n_clusters : int, default=5
    epsilon : float
    bounds : tuple of float or None, default=(-0.5, 0.5)
        Per-feature bounds, public; the research configuration uses +/-0.5. ``None`` takes the
        data's range, which leaks it: a :class:`PrivacyLeakWarning` is emitted.
    n_iter : int or None, default=None
        Lloyd iterations, public. ``None`` applies Su et al.'s rule (:func:`su_iterations`) to
        the ``noisy_n_samples`` given to :meth:`fit`.
    random_state : int or None
        ``None`` (for releases): diffprivlib's secure mode, noise from ``secrets.SystemRandom``;
        an int makes the noise reproducible and guessable (tests only).
    ledger : PrivacyLedger or None

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
    labels_ : ndarray of shape (n_samples,)
        Assignment of each training row to the final centres (private: never released).
    n_iter_ : int
        Iterations run.

    Privacy
    -------
    Pure epsilon-DP by diffprivlib's DPLloyd (Su et al. 2016), data clipped to ``bounds``,
    recorded as a pure release that composes by basic composition. Each of the ``n_iter_``
    iterations spends ``epsilon / n_iter_``: every cluster's count gets folded geometric noise
    at ``eps_count`` and each of its ``d`` coordinate sums bounded-domain Laplace noise at
    ``eps_coord``, with ``eps_count / eps_coord = cbrt(4 d 0.225^2)`` and
    ``eps_count + d eps_coord = epsilon / n_iter_``; clusters are disjoint, so adding or
    removing a row moves one count (by 1) and ``d`` sums. diffprivlib 0.6.6 breaks this in
    three places, fixed here:

    * its ``fit`` unpacks the split the wrong way round, giving the count ``eps_coord`` and
      each coordinate ``eps_count``: ``(1 + d c) / (d + c)`` times the budget,
      ``c = cbrt(4 d 0.225^2)``, 1.52x at ``d = 20`` and 2.28x at ``d = 64``;
    * its iteration count, and so every iteration's noise, is a function of the exact number
      of rows; here it is ``n_iter`` or comes from a noisy count;
    * a cluster with no rows keeps its centre unnoised, so the output shows that it is empty
      (one row makes it a noisy mean); here every cluster is noised every iteration.

    The sum sensitivity is diffprivlib's ``upper - lower``, raised to ``max(|lower|, |upper|)``
    (what one added row moves a sum by) when the bounds exclude 0.
    """

    def __init__(
        self,
        n_clusters: int = 5,
        *,
        epsilon: float = 1.0,
        bounds: tuple[float, float] | None = (-0.5, 0.5),
        n_iter: int | None = None,
        random_state: int | None = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.n_iter = n_iter
        self.random_state = random_state
        self.ledger = ledger

    def fit(
        self, X: np.ndarray, y: None = None, *, noisy_n_samples: float | None = None
    ) -> DiffprivlibKMeans:
        """Fit the centres.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
        y : None
        noisy_n_samples : float or None
            A DP (or public) estimate of ``n_samples``, used only to set the iteration count
            when ``n_iter`` is None; never the exact count, which would leak through it.
        """
        X = check_matrix(X)
        if self.n_iter is not None:
            n_iter = self.n_iter
        elif noisy_n_samples is not None:
            n_iter = su_iterations(self.epsilon, self.n_clusters, X.shape[1], noisy_n_samples)
        else:
            raise ValueError("set n_iter, or pass fit a noisy_n_samples to set it from")
        if n_iter < 1:
            raise ValueError(f"n_iter must be at least 1, got {n_iter}")
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
            params={"algorithm": "diffprivlib.models.KMeans", "bounds": [lo, hi], "n_iter": n_iter},
        )
        if self.ledger is not None:
            self.ledger.check(release)
        d = X.shape[1]
        model = _dp_lloyd()(
            self.n_clusters,
            epsilon=self.epsilon,
            bounds=(np.full(d, lo), np.full(d, hi)),
            n_iter=n_iter,
            random_state=self.random_state,
        )
        model.fit(np.clip(X, lo, hi))
        self.cluster_centers_ = model.cluster_centers_
        self.labels_ = self.predict(X)
        self.n_iter_ = n_iter
        self.epsilon_spent_ = self.epsilon
        if self.ledger is not None:
            self.ledger.spend(release)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self)
        X = check_matrix(X)
        d2 = ((X[:, None, :] - self.cluster_centers_[None]) ** 2).sum(-1)
        return d2.argmin(axis=1)
