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
    model: PreferenceModel,
    chosen: np.ndarray,
    rejected: np.ndarray,
    *,
    prompts: np.ndarray | None = None,
    tol: float = 1e-12,
) -> RewardAccuracy:
    """Accuracy on embedded held-out pairs; a tie counts one half.

    Clusters are weighted by the noisy probabilities, or, for a prompt-routed model, the
    cluster is the one its ``prompts`` embedding is routed to. ``ties`` counts pairs whose
    score difference is zero under every cluster that counts.
    """
    margin = model.scores(chosen) - model.scores(rejected)  # (n, K)
    correct = np.where(np.abs(margin) <= tol, 0.5, (margin > 0).astype(float))
    if model.routing == "prompt":
        if prompts is None:
            raise ValueError("a prompt-routed model needs the prompts' embeddings")
        weights = np.eye(model.n_clusters)[model.route(prompts)]
    else:
        weights = np.broadcast_to(model.cluster_weights, margin.shape)
    per_pair = (correct * weights).sum(axis=1)
    ties = int(((np.abs(margin) <= tol) | (weights == 0)).all(axis=1).sum())
    return RewardAccuracy(accuracy=float(per_pair.mean()), n=len(per_pair), ties=ties)
