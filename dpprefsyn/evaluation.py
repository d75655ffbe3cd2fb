"""Label-blind evaluation of a preference model on held-out pairs.

Scores both responses with every cluster's reward and averages correctness with the noisy
cluster probabilities, the way synthesis uses the rewards. The cluster is never chosen from
the ordered chosen-minus-rejected difference: that would read the label.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpprefsyn.artifact import PreferenceModel


@dataclass(frozen=True)
class RewardAccuracy:
    accuracy: float
    n: int
    ties: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def label_blind_accuracy(
    model: PreferenceModel, chosen: np.ndarray, rejected: np.ndarray, *, tol: float = 1e-12
) -> RewardAccuracy:
    """Accuracy on embedded held-out pairs; a tie counts one half.

    ``ties`` counts pairs whose score difference is zero under every kept cluster.
    """
    margin = model.scores(chosen) - model.scores(rejected)  # (n, K)
    correct = np.where(np.abs(margin) <= tol, 0.5, (margin > 0).astype(float))
    per_pair = correct @ model.cluster_weights
    kept = model.kept_clusters
    ties = int((np.abs(margin[:, kept]) <= tol).all(axis=1).sum())
    return RewardAccuracy(accuracy=float(per_pair.mean()), n=len(per_pair), ties=ties)
