"""Membership inference on what we release: the preference model and the synthetic dataset.

A DP release bounds any attacker's advantage, so a strong attack whose AUC stays near 0.5 is
evidence the implementation does not leak beyond its noise; an AUC well above 0.5 on a release
claimed at a small epsilon is a bug. The attacks here are the natural ones for each release:

* the model: a pair's reward margin ``r(x, a+) - r(x, a-)`` (a model that memorised its
  training pairs ranks them more confidently: the loss attack of Yeom et al. 2018);
* the dataset: how close a private pair's preference direction lies to the nearest synthetic
  pair's (a dataset that copied or echoed its private pairs contains near-duplicates).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from dpprefsyn.artifact import PreferenceModel


@dataclass(frozen=True)
class MembershipResult:
    """ROC AUC of a membership score (0.5 = no signal) with a 95% interval."""

    auc: float
    auc_low: float
    auc_high: float
    advantage: float
    n_members: int
    n_non_members: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def membership_auc(members: np.ndarray, non_members: np.ndarray) -> MembershipResult:
    """AUC of "higher score means member", with the Hanley-McNeil (1982) standard error.

    ``advantage`` is the best ``TPR - FPR`` over thresholds, the quantity DP bounds by
    :func:`dp_advantage_bound` (the empirical maximum is biased upwards on small samples).
    """
    from sklearn.metrics import roc_auc_score, roc_curve

    members = np.asarray(members, dtype=np.float64).ravel()
    non_members = np.asarray(non_members, dtype=np.float64).ravel()
    if len(members) == 0 or len(non_members) == 0:
        raise ValueError("membership inference needs at least one member and one non-member")
    if not (np.isfinite(members).all() and np.isfinite(non_members).all()):
        raise ValueError("membership scores must be finite")
    truth = np.r_[np.ones(len(members)), np.zeros(len(non_members))]
    scores = np.r_[members, non_members]
    auc = float(roc_auc_score(truth, scores))
    fpr, tpr, _ = roc_curve(truth, scores)
    n1, n0 = len(members), len(non_members)
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    se = math.sqrt(
        max(auc * (1 - auc) + (n1 - 1) * (q1 - auc**2) + (n0 - 1) * (q2 - auc**2), 0.0) / (n1 * n0)
    )
    return MembershipResult(
        auc=auc,
        auc_low=max(auc - 1.96 * se, 0.0),
        auc_high=min(auc + 1.96 * se, 1.0),
        advantage=float((tpr - fpr).max()),
        n_members=n1,
        n_non_members=n0,
    )


def dp_advantage_bound(epsilon: float, delta: float) -> float:
    """Largest ``TPR - FPR`` any membership test can reach on one record of an
    (epsilon, delta)-DP release (Kairouz, Oh and Viswanath 2015)."""
    return min((math.expm1(epsilon) + 2 * delta) / (math.exp(epsilon) + 1), 1.0)


def model_margin_scores(
    model: PreferenceModel, chosen: np.ndarray, rejected: np.ndarray
) -> np.ndarray:
    """Reward margin of each pair under the model's noisy-probability mixture of clusters."""
    return model.mixture_reward(chosen) - model.mixture_reward(rejected)


def dataset_similarity_scores(
    differences: np.ndarray, synthetic_differences: np.ndarray, *, block: int = 4096
) -> np.ndarray:
    """For each private pair, the largest cosine between its preference direction and any
    synthetic pair's (``chosen - rejected`` embeddings on both sides)."""
    a = _unit(np.asarray(differences, dtype=np.float64))
    b = _unit(np.asarray(synthetic_differences, dtype=np.float64))
    if a.shape[1] != b.shape[1]:
        raise ValueError("private and synthetic differences must share one embedding space")
    if len(b) == 0:
        raise ValueError("the synthetic dataset is empty")
    return np.concatenate([(a[i : i + block] @ b.T).max(axis=1) for i in range(0, len(a), block)])


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
