"""The reranker: best-of-N under each scoring rule, no privacy spent."""

from __future__ import annotations

import numpy as np
import pytest

from dpprefsyn.artifact import PreferenceModel
from dpprefsyn.rerank import best_of_n, reward_scores


@pytest.fixture
def model() -> PreferenceModel:
    return PreferenceModel(
        projection=np.eye(2),
        thetas=np.array([[1.0, 0.0], [0.0, 3.0]]),
        cluster_weights=np.array([0.75, 0.25]),
        centers=np.eye(2),
        embedder={},
    )


def test_scoring_rules(model):
    emb = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert reward_scores(model, emb).tolist() == [0.75, 0.75]
    assert reward_scores(model, emb, scoring="mean").tolist() == [0.5, 1.5]
    assert reward_scores(model, emb, scoring="cluster", cluster=1).tolist() == [0.0, 3.0]
    with pytest.raises(ValueError, match="cluster"):
        reward_scores(model, emb, scoring="cluster")


def test_best_of_n_picks_the_top_score_with_its_margin():
    table = best_of_n(
        ["p", "q"],
        [[("a", "m1"), ("b", "m2"), ("c", "m3")], []],
        [np.array([0.1, 0.9, 0.5]), np.array([])],
    )
    assert table.height == 1
    row = table.row(0, named=True)
    assert (row["response"], row["generator"]) == ("b", "m2")
    assert row["margin"] == pytest.approx(0.4)
