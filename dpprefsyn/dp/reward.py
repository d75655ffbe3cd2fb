"""Per-cluster linear Bradley-Terry rewards on unit preference vectors.

``z`` is the projected, unit-normalised difference ``psi(x, a+) - psi(x, a-)``; a reward
``theta`` prefers ``a+`` when ``theta . z > 0``. Clusters are disjoint, so every estimator here
trains all clusters at once and their releases compose in parallel.
"""

from __future__ import annotations

import logging
import uuid

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from dpprefsyn.dp._validation import check_budget, check_matrix, clip_rows
from dpprefsyn.dp.sgd import train_linear_bt
from dpprefsyn.privacy import PrivacyLedger, Release
from dpprefsyn.privacy.accountants import (
    calibrate_subsampled_gaussian,
    subsampled_gaussian_epsilon,
)
from dpprefsyn.privacy.analysis import gaussian_mu

log = logging.getLogger(__name__)


def _check_fit_inputs(z, groups, noisy_counts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # No rows is valid input: kept clusters may hold no record (their counts are noisy), and
    # refusing them would reveal that. Their rewards are then noise alone, as DP requires.
    z = np.asarray(z, dtype=np.float64)
    if not (z.ndim == 2 and z.shape[0] == 0 and z.shape[1] > 0):
        z = check_matrix(z, "z")
    groups = np.asarray(groups, dtype=np.int64)
    noisy_counts = np.asarray(noisy_counts, dtype=np.float64)
    if groups.shape != (len(z),):
        raise ValueError("groups must have one label per row of z")
    if groups.size and (groups.min() < 0 or groups.max() >= len(noisy_counts)):
        raise ValueError("group labels must index noisy_counts")
    return z, groups, noisy_counts


class _LinearReward(BaseEstimator):
    """Shared by the reward estimators: one linear reward per cluster in ``coef_``."""

    def decision_function(self, z: np.ndarray) -> np.ndarray:
        """Reward of each row under each cluster, shape ``(n, n_clusters)``."""
        check_is_fitted(self)
        return check_matrix(z, "z") @ self.coef_.T


class DPMeanReward(_LinearReward):
    """One Newton step of Bradley-Terry from zero, on the Gaussian-noised cluster sums.

    At ``theta = 0`` the BT gradient is ``-mean(z)/2`` and, for unit rows in ``p`` dimensions,
    the isotropic Hessian estimate is ``I / (4p)``, so the step is ``theta = 2p * mean(z)``. A
    single full-batch release spends the whole budget on the signal, where small-batch DP-SGD
    adds noise at every step.

    Parameters
    ----------
    epsilon, delta : float
        Guarantee of the release (every cluster at once, by parallel composition).
    clip : float, default=1.0
        L2 bound of each row.
    random_state, ledger
        As in the other estimators.

    Attributes
    ----------
    coef_ : ndarray of shape (n_clusters, p)

    Privacy
    -------
    Gaussian mechanism on each cluster's sum of clipped rows; sensitivity ``clip`` under
    add/remove, and a record touches one cluster only. The divisor is the *noisy* cluster size
    from the DP histogram.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        clip: float = 1.0,
        random_state: int | np.random.Generator | None = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.clip = clip
        self.random_state = random_state
        self.ledger = ledger

    def fit(self, z: np.ndarray, groups: np.ndarray, noisy_counts: np.ndarray) -> DPMeanReward:
        z, groups, noisy_counts = _check_fit_inputs(z, groups, noisy_counts)
        check_budget(self.epsilon, self.delta, "DPMeanReward")
        if not self.clip > 0:
            raise ValueError(f"DPMeanReward: clip must be positive, got {self.clip}")
        mu = gaussian_mu(self.epsilon, self.delta)
        k, p = len(noisy_counts), z.shape[1]
        release = Release(
            "reward",
            "gaussian",
            epsilon=self.epsilon,
            delta=self.delta,
            mu=mu,
            params={"estimator": "dp-mean", "sensitivity": self.clip, "noise_std": self.clip / mu},
        )
        if self.ledger is not None:
            self.ledger.check(release)
        rng = np.random.default_rng(self.random_state)
        sums = np.zeros((k, p))
        np.add.at(sums, groups, clip_rows(z, self.clip))
        sums += rng.normal(0.0, self.clip / mu, size=(k, p))
        self.coef_ = 2 * p * sums / np.maximum(noisy_counts, 1.0)[:, None]
        self.epsilon_spent_ = self.epsilon
        if self.ledger is not None:
            self.ledger.spend(release)
        return self


class DPNewtonReward(_LinearReward):
    """One full Newton step of Bradley-Terry from zero, on noisy first and second moments.

    At ``theta = 0`` the BT gradient is ``-mean(z)/2`` and the Hessian ``E[z z^T]/4``, so the
    step is ``theta = 2 (E[z z^T] + lam I)^{-1} mean(z)``: the mean direction whitened by the
    spread of the preference vectors, which the isotropic :class:`DPMeanReward` ignores (on the
    demo data it lifts held-out accuracy from 0.62 to 0.82 before any noise).

    Parameters
    ----------
    epsilon, delta : float
    ridge : float, default=0.01
        Added to the eigenvalues of the second moment (whose trace is 1 for unit rows). The
        ridge also grows with the noise: ``ridge + 2 sigma sqrt(p) / n~``, the typical size of
        the noise matrix's spectrum, computed from public values and the noisy count.
    clip : float, default=1.0
    random_state, ledger

    Attributes
    ----------
    coef_ : ndarray of shape (n_clusters, p)

    Privacy
    -------
    One Gaussian mechanism per cluster on the pair ``(sum z, upper triangle of sum z z^T)``.
    For a row clipped to ``||z|| <= c`` the L2 sensitivity is ``sqrt(c**2 + c**4)``
    (``sqrt(2)`` at ``c = 1``); clusters are disjoint, so they compose in parallel. The
    inverse, the ridge and the division by the noisy count are post-processing.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        ridge: float = 0.01,
        clip: float = 1.0,
        random_state: int | np.random.Generator | None = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.ridge = ridge
        self.clip = clip
        self.random_state = random_state
        self.ledger = ledger

    def fit(self, z: np.ndarray, groups: np.ndarray, noisy_counts: np.ndarray) -> DPNewtonReward:
        z, groups, noisy_counts = _check_fit_inputs(z, groups, noisy_counts)
        check_budget(self.epsilon, self.delta, "DPNewtonReward")
        if not self.clip > 0 or not self.ridge >= 0:
            raise ValueError("DPNewtonReward: clip must be positive and ridge non-negative")
        mu = gaussian_mu(self.epsilon, self.delta)
        sensitivity = float(np.sqrt(self.clip**2 + self.clip**4))
        sigma = sensitivity / mu
        release = Release(
            "reward",
            "gaussian",
            epsilon=self.epsilon,
            delta=self.delta,
            mu=mu,
            params={"estimator": "dp-newton", "sensitivity": sensitivity, "noise_std": sigma},
        )
        if self.ledger is not None:
            self.ledger.check(release)
        rng = np.random.default_rng(self.random_state)
        k, p = len(noisy_counts), z.shape[1]
        zc = clip_rows(z, self.clip)
        coef = np.zeros((k, p))
        for c in range(k):
            rows = zc[groups == c]
            s = rows.sum(axis=0) + rng.normal(0.0, sigma, size=p)
            noise = np.triu(rng.normal(0.0, sigma, size=(p, p)))
            m = rows.T @ rows + noise + np.triu(noise, 1).T
            n_c = max(float(noisy_counts[c]), 1.0)
            eigval, eigvec = np.linalg.eigh(m / n_c)
            lam = self.ridge * self.clip**2 + 2 * sigma * np.sqrt(p) / n_c
            inv = (eigvec / (np.clip(eigval, 0.0, None) + lam)) @ eigvec.T
            coef[c] = 2 * inv @ (s / n_c)
        self.coef_ = coef
        self.epsilon_spent_ = self.epsilon
        if self.ledger is not None:
            self.ledger.spend(release)
        return self


class DPSGDReward(_LinearReward):
    """The method's reward: per-cluster DP-SGD on ``-log sigmoid(theta . z)``.

    Parameters
    ----------
    epsilon, delta : float
        Share of the budget for this stage, fixed before any data are read.
    lr : float, default=0.1
    batch_size : int, default=4
        Expected Poisson batch size.
    epochs : float, default=4
    clip : float, default=1.0
    random_state, ledger

    Attributes
    ----------
    coef_ : ndarray of shape (n_clusters, p)
    noise_multiplier_ : float
    sample_rates_, steps_ : ndarray

    Privacy
    -------
    Poisson-subsampled Gaussian mechanism per step, sensitivity ``clip``. Cluster ``k`` samples
    at ``q_k = batch_size / n~_k`` for ``ceil(epochs / q_k)`` steps, where ``n~_k`` is the DP
    histogram's count, never the exact size. The noise multiplier is the smallest one for
    which the most expensive cluster costs at most ``(epsilon, delta)`` (the smaller of the PRV
    and pessimistic PLD bounds);
    clusters are disjoint, so that is the whole stage's cost.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        lr: float = 0.1,
        batch_size: int = 4,
        epochs: float = 4,
        clip: float = 1.0,
        random_state: int | np.random.Generator | None = None,
        ledger: PrivacyLedger | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.lr = lr
        self.batch_size = batch_size
        self.epochs = epochs
        self.clip = clip
        self.random_state = random_state
        self.ledger = ledger

    def fit(self, z: np.ndarray, groups: np.ndarray, noisy_counts: np.ndarray) -> DPSGDReward:
        z, groups, noisy_counts = _check_fit_inputs(z, groups, noisy_counts)
        check_budget(self.epsilon, self.delta, "DPSGDReward")
        for name in ("lr", "clip", "epochs"):
            if not getattr(self, name) > 0:
                raise ValueError(f"DPSGDReward: {name} must be positive")
        if int(self.batch_size) != self.batch_size or self.batch_size < 1:
            raise ValueError("DPSGDReward: batch_size must be a positive integer")
        sizes = np.maximum(noisy_counts, float(self.batch_size))
        rates = np.minimum(1.0, self.batch_size / sizes)
        steps = np.ceil(self.epochs / rates).astype(np.int64)
        plans = sorted({(float(q), int(t)) for q, t in zip(rates, steps, strict=True)})
        log.info(
            "DP-SGD: calibrating the noise for %d cluster(s), up to %d steps each",
            len(plans),
            max(t for _, t in plans),
        )
        sigma = calibrate_subsampled_gaussian(self.epsilon, self.delta, plans)
        log.info("DP-SGD: noise multiplier %.4g; training", sigma)
        # One parallel group per fit: its clusters are disjoint, but two fits are not.
        group = f"reward-clusters-{uuid.uuid4().hex[:8]}"
        releases = [
            Release(
                "reward",
                "subsampled_gaussian",
                epsilon=subsampled_gaussian_epsilon(sigma, float(q), int(t), self.delta),
                delta=self.delta,
                group=group,
                params={
                    "estimator": "dp-sgd",
                    "cluster": int(c),
                    "noise_multiplier": sigma,
                    "sample_rate": float(q),
                    "steps": int(t),
                    "clip": self.clip,
                },
            )
            for c, (q, t) in enumerate(zip(rates, steps, strict=True))
        ]
        if self.ledger is not None:
            self.ledger.check(*releases)
        rng = np.random.default_rng(self.random_state)
        self.coef_ = train_linear_bt(
            z,
            groups,
            n_groups=len(noisy_counts),
            sample_rates=rates,
            steps=steps,
            noise_multiplier=sigma,
            clip=self.clip,
            lr=self.lr,
            expected_batch_sizes=rates * sizes,
            rng=rng,
        )
        self.noise_multiplier_ = sigma
        self.sample_rates_ = rates
        self.steps_ = steps
        self.epsilon_spent_ = max(r.epsilon for r in releases)
        if self.ledger is not None:
            self.ledger.spend(*releases)
        return self
