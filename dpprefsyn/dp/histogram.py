"""Noisy cluster sizes: the only counts the rest of the pipeline may see."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from dpprefsyn.dp._validation import check_budget
from dpprefsyn.privacy import PrivacyLedger, Release
from dpprefsyn.privacy.analysis import gaussian_mu


class DPHistogram(BaseEstimator):
    """Gaussian-noised counts of integer labels, empty bins included.

    Parameters
    ----------
    n_bins : int
    epsilon, delta : float
    random_state : int, numpy.random.Generator or None
    ledger : PrivacyLedger or None
    stage : str, default="histogram"

    Attributes
    ----------
    counts_ : ndarray of shape (n_bins,)
        Noisy counts (may be negative; see :meth:`probabilities`).
    noise_std_ : float

    Privacy
    -------
    Adding or removing one record changes one bin by 1 (L2 sensitivity 1); every bin gets
    noise, empty ones too, so which clusters are empty is not revealed. Noise std ``1/mu``.
    """

    def __init__(
        self,
        n_bins: int,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        random_state: int | np.random.Generator | None = None,
        ledger: PrivacyLedger | None = None,
        stage: str = "histogram",
    ) -> None:
        self.n_bins = n_bins
        self.epsilon = epsilon
        self.delta = delta
        self.random_state = random_state
        self.ledger = ledger
        self.stage = stage

    def fit(self, labels: np.ndarray, y: None = None) -> DPHistogram:
        labels = np.asarray(labels)
        check_budget(self.epsilon, self.delta, "DPHistogram")
        if labels.size and not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"labels must be integers, got dtype {labels.dtype}")
        if labels.ndim != 1 or (labels.size and (labels.min() < 0 or labels.max() >= self.n_bins)):
            raise ValueError(f"labels must be a 1-D array of integers in [0, {self.n_bins})")
        mu = gaussian_mu(self.epsilon, self.delta)
        release = Release(
            self.stage,
            "gaussian",
            epsilon=self.epsilon,
            delta=self.delta,
            mu=mu,
            params={"sensitivity": 1.0, "noise_std": 1.0 / mu, "bins": self.n_bins},
        )
        if self.ledger is not None:
            self.ledger.check(release)
        rng = np.random.default_rng(self.random_state)
        exact = np.bincount(labels.astype(np.int64), minlength=self.n_bins).astype(float)
        self.counts_ = exact + rng.normal(0.0, 1.0 / mu, size=self.n_bins)
        self.noise_std_ = 1.0 / mu
        self.epsilon_spent_ = self.epsilon
        if self.ledger is not None:
            self.ledger.spend(release)
        return self

    def probabilities(self, keep: np.ndarray | None = None) -> np.ndarray:
        """Cluster probabilities from the noisy counts (post-processing), zero where dropped."""
        check_is_fitted(self)
        c = np.clip(self.counts_, 0.0, None)
        if keep is not None:
            c = np.where(keep, c, 0.0)
        total = c.sum()
        if total <= 0:
            raise ValueError("every noisy cluster count is zero: the dataset is too small")
        return c / total


def dp_count(n: int, *, epsilon: float, rng: np.random.Generator) -> tuple[float, Release]:
    """Laplace-noised record count, used only to set ``delta = 1/n`` without the exact ``n``.

    Privacy: sensitivity 1 under add/remove, Laplace scale ``1/epsilon``: pure epsilon-DP,
    composed with the rest by basic composition.
    """
    if not epsilon > 0:
        raise ValueError(f"count epsilon must be positive, got {epsilon}")
    noisy = float(n + rng.laplace(0.0, 1.0 / epsilon))
    return noisy, Release("count", "laplace", epsilon=epsilon, params={"sensitivity": 1.0})
