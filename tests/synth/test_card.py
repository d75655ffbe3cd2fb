"""The dataset card's privacy statement: what a privacy officer needs, with the run's numbers."""

from __future__ import annotations

import numpy as np
import pytest

from dpprefsyn.private import FitConfig, fit_from_embeddings
from dpprefsyn.synth.export import dataset_card


def _card(cfg: FitConfig) -> tuple[str, dict]:
    rng = np.random.default_rng(0)
    chosen, rejected = rng.normal(size=(400, 16)), rng.normal(size=(400, 16))
    pool = rng.normal(size=(100, 16))
    model = fit_from_embeddings(chosen, rejected, cfg, public_differences=pool)
    meta = {"embedder": {"embedding_model": "all-MiniLM-L6-v2"}, "config": model.config}
    card = dataset_card(
        model.privacy_report,
        n_pairs=10,
        dropped={},
        prompt_sources=["alpaca_eval.json"],
        generators=["gpt-x", "llama-y"],
        private_fingerprint="f00",
        style="standard",
        model_meta=meta,
    )
    return card, model.privacy_report


def test_the_card_names_this_runs_public_inputs_and_secure_noise():
    """The full list of items is checked on a pipeline run (tests/hostile); here, the inputs."""
    card, report = _card(FitConfig(epsilon=3.0, n_components=8))
    assert f"epsilon={report['total']['epsilon']:.4g} (of a budget of epsilon=3)" in card
    assert "1/n~ from the noisy count" in card
    for public in ("all-MiniLM-L6-v2", "gpt-x, llama-y", "alpaca_eval.json"):
        assert public in card
    assert "the public candidate pool the projection is fitted on" in card
    assert "Drawn from numpy PCG64 seeded with 128 bits from the OS CSPRNG" in card
    assert "no guarantee" not in card
    assert "paper preset" not in card


def test_a_fixed_seed_is_called_out_as_no_guarantee():
    card, _ = _card(FitConfig(epsilon=3.0, n_components=8, insecure_seed=0))
    assert "insecure fixed seed" in card and "no guarantee" in card


@pytest.mark.filterwarnings("ignore")
def test_the_paper_presets_k_means_caveats_are_stated():
    cfg = FitConfig.paper(
        epsilon=4.0,
        n_components=4,
        reward="dp-newton",
        budget_split={"pca": 0.25, "cluster": 0.25, "histogram": 0.05, "reward": 0.45},
    )
    card, _ = _card(cfg)
    assert "`cluster`: diffprivlib's k-means" in card
    assert "`pca`: DP-PCA" in card
    assert "secrets.SystemRandom" in card
    assert "Refit the model" not in card  # the caveat of models fitted before the k-means fix
    assert "the public candidate pool the projection is fitted on" not in card
