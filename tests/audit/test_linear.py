"""Least-squares membership scores of canaries in a linear model's weights."""

from __future__ import annotations

import numpy as np
import pytest

from dpprefsyn.audit import linear_scores
from dpprefsyn.dp._validation import normalize_rows


def test_scores_recover_each_rows_share_where_dot_products_blur() -> None:
    """Weights built from some canaries and known rows: least squares recovers the canaries'
    coefficients exactly, while dot products mix in the known rows' common direction."""
    rng = np.random.default_rng(0)
    canaries = normalize_rows(rng.normal(size=(40, 100)))
    known = normalize_rows(1.0 + 0.3 * rng.normal(size=(20, 100)))
    share = np.where(rng.random(40) < 0.5, 0.05, 0.0)
    weights = share @ canaries + 2.0 * known.sum(axis=0)
    np.testing.assert_allclose(linear_scores(weights, canaries, known=known), share, atol=1e-9)
    dots = canaries @ weights
    assert np.corrcoef(dots, share)[0, 1] < 0.5


def test_scores_without_known_rows() -> None:
    rng = np.random.default_rng(1)
    canaries = normalize_rows(rng.normal(size=(10, 30)))
    share = rng.random(10)
    np.testing.assert_allclose(linear_scores(share @ canaries, canaries), share, atol=1e-9)


@pytest.mark.parametrize(
    ("weights", "canaries", "known"),
    [
        (np.ones((2, 3)), np.ones((4, 3)), None),
        (np.ones(3), np.ones((4, 2)), None),
        (np.ones(3), np.ones((4, 3)), np.ones((2, 2))),
        (np.array([1.0, np.nan, 0.0]), np.ones((4, 3)), None),
    ],
)
def test_bad_shapes_raise(weights, canaries, known) -> None:
    with pytest.raises(ValueError):
        linear_scores(weights, canaries, known=known)
