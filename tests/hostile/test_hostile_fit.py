"""Hostile embeddings straight into ``fit_from_embeddings``: a DataError or a sound model.

The loaders and the embedder already refuse most bad input; these are the arrays that still
reach the fit from other callers, or from text the loaders cannot tell apart from good text.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from dpprefsyn.dp import DPMeanReward, DPNewtonReward, DPSGDReward
from dpprefsyn.errors import DataError, DatasetTooSmallError
from dpprefsyn.private import FitConfig, fit_from_embeddings

D = 16
FAST = {"epsilon": 4.0, "n_components": 8, "insecure_seed": 0}


def pairs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, D))
    return base + rng.normal(size=(n, D)), base


@pytest.mark.parametrize(
    ("side", "value", "says"),
    [
        ("chosen", np.nan, "NaN or infinite"),
        ("rejected", np.inf, "NaN or infinite"),
        ("chosen", 0.0, "embedding is zero"),
        ("rejected", 0.0, "embedding is zero"),
    ],
)
def test_broken_embeddings_name_the_record_and_field(side, value, says):
    chosen, rejected = pairs(300)
    target = chosen if side == "chosen" else rejected
    target[7] = value
    ids = [f"data.jsonl:{i}" for i in range(300)]
    for on_error in ("raise", "drop"):  # a broken embedder is never a per-record drop
        with pytest.raises(DataError) as info:
            fit_from_embeddings(
                chosen, rejected, FitConfig(**FAST), record_ids=ids, on_error=on_error
            )
        assert (info.value.record, info.value.field) == ("data.jsonl:7", side)
        assert says in info.value.reason


def test_nan_prompt_embedding_names_the_prompt():
    chosen, rejected = pairs(300)
    prompts = np.ones((300, 4))
    prompts[9, 2] = np.nan
    cfg = FitConfig(**FAST, clustering="spherical", n_clusters=3, cluster_on="prompt")
    with pytest.raises(DataError) as info:
        fit_from_embeddings(chosen, rejected, cfg, prompts=prompts)
    assert (info.value.record, info.value.field) == ("9", "prompt")


def test_identical_embeddings_raise_or_are_dropped_and_counted(caplog):
    chosen, rejected = pairs(300)
    rejected[[4, 11]] = chosen[[4, 11]]
    with pytest.raises(DataError) as info:
        fit_from_embeddings(chosen, rejected, FitConfig(**FAST))
    assert (info.value.record, info.value.field) == ("4", "rejected")
    with caplog.at_level(logging.WARNING, logger="dpprefsyn.private.fit"):
        model = fit_from_embeddings(chosen, rejected, FitConfig(**FAST), on_error="drop")
    assert "dropped 2 record(s)" in caplog.text
    assert np.isfinite(model.thetas).all()
    # The exact number of drops is for the operator's console, never the released report.
    assert "identical" not in str(model.privacy_report)


def test_every_record_identical_in_embedding_is_an_error():
    chosen, _ = pairs(50)
    with pytest.raises(DataError, match="every record embeds identically"):
        fit_from_embeddings(chosen, chosen.copy(), FitConfig(**FAST), on_error="drop")


def test_all_records_the_same_pair_fit_a_sound_model():
    """Duplicated records are records: the fit runs, and the reward points their way."""
    chosen, rejected = pairs(1)
    chosen, rejected = np.repeat(chosen, 300, axis=0), np.repeat(rejected, 300, axis=0)
    model = fit_from_embeddings(chosen, rejected, FitConfig(**FAST, projection="none"))
    assert np.isfinite(model.thetas).all()
    assert model.scores(chosen[:1]) @ model.cluster_weights > (
        model.scores(rejected[:1]) @ model.cluster_weights
    )


@pytest.mark.parametrize("reward", ["dp-newton", pytest.param("dp-sgd", marks=pytest.mark.slow)])
def test_every_record_in_one_cluster(reward):
    """One preference direction for all: the other clusters hold only noise and are dropped."""
    rng = np.random.default_rng(3)
    rejected = rng.normal(size=(400, D))
    chosen = rejected + np.eye(D)[0] * (1 + rng.random((400, 1)))
    cfg = FitConfig(
        **FAST, clustering="spherical", n_clusters=5, projection="none", reward=reward, epochs=1
    )
    model = fit_from_embeddings(chosen, rejected, cfg)
    kept = model.privacy_report["kept_clusters"]
    assert 1 <= len(kept) < 5
    assert model.cluster_weights.sum() == pytest.approx(1.0)
    assert np.isfinite(model.thetas).all()


@pytest.mark.parametrize(
    "estimator",
    [
        DPNewtonReward(epsilon=1.0, delta=1e-5),
        DPMeanReward(epsilon=1.0, delta=1e-5),
        pytest.param(DPSGDReward(epsilon=1.0, delta=1e-5, epochs=1), marks=pytest.mark.slow),
    ],
    ids=["dp-newton", "dp-mean", "dp-sgd"],
)
def test_a_kept_cluster_without_records_gets_noise_not_an_error(estimator):
    """Kept clusters come from noisy counts, so one may hold no record; failing would tell."""
    estimator.fit(np.empty((0, 4)), np.empty(0, dtype=np.int64), np.array([12.0, 30.0]))
    assert estimator.coef_.shape == (2, 4)
    assert np.isfinite(estimator.coef_).all() and np.abs(estimator.coef_).sum() > 0


def test_paper_preset_smaller_than_k_times_batch_is_refused_before_any_dp_sgd():
    chosen, rejected = pairs(19)
    with pytest.raises(DatasetTooSmallError) as info:
        fit_from_embeddings(chosen, rejected, FitConfig.paper(insecure_seed=0))
    assert "per cluster (5 clusters)" in str(info.value)
    assert info.value.spent_epsilon == pytest.approx(0.02 * 2.0)  # the count, nothing else
