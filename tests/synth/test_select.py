"""Selection and export: post-processing of the DP model on public candidates."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpprefsyn.artifact import PreferenceModel
from dpprefsyn.synth.export import export_dataset
from dpprefsyn.synth.select import select_pairs


def model(k: int = 2, routing: str = "sample") -> PreferenceModel:
    """Rewards on 3-d embeddings: cluster 0 likes axis 0, cluster 1 likes axis 1."""
    thetas = np.zeros((k, 3))
    thetas[0, 0] = 1.0
    if k > 1:
        thetas[1, 1] = 1.0
    return PreferenceModel(
        projection=np.eye(3),
        thetas=thetas,
        cluster_weights=np.full(k, 1.0 / k),
        centers=np.eye(3)[:k] if routing == "prompt" else None,
        routing=routing,
        embedder={},
        privacy_report={
            "total": {"epsilon": 1.0, "delta": 1e-5},
            "neighbouring_relation": "add/remove one record",
            "composition": "GDP",
            "releases": [
                {"stage": "reward", "mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-5}
            ],
        },
    )


def test_best_and_worst_under_the_drawn_cluster():
    m = model(k=1)
    cands = [[("a", "g1"), ("b", "g2"), ("c", "g3")]]
    emb = [np.array([[0.0, 0, 0], [2.0, 0, 0], [-1.0, 0, 0]])]
    sel = select_pairs(m, ["p0"], ["prompt"], ["src"], cands, emb, rng=np.random.default_rng(0))
    row = sel.pairs.row(0, named=True)
    assert (row["chosen"], row["rejected"]) == ("b", "c")
    assert row["score_gap"] == pytest.approx(3.0)
    assert (row["generator_chosen"], row["generator_rejected"]) == ("g2", "g3")


def test_small_gaps_and_lonely_prompts_are_dropped_and_counted():
    m = model(k=1)
    cands = [[("a", "g"), ("b", "g")], [("only", "g")]]
    emb = [np.array([[0.1, 0, 0], [0.0, 0, 0]]), np.zeros((1, 3))]
    sel = select_pairs(
        m, ["p0", "p1"], ["x", "y"], ["s", "s"], cands, emb, rng=np.random.default_rng(0)
    )
    assert len(sel.pairs) == 0
    assert sel.dropped == {"score_gap_below_threshold": 1, "fewer_than_two_candidates": 1}


def test_cluster_draws_follow_the_noisy_weights():
    m = model(k=2)
    n = 4000
    cands = [[("x", "g"), ("y", "g")]] * n
    emb = [np.array([[1.0, -1.0, 0], [-1.0, 1.0, 0]])] * n
    sel = select_pairs(
        m, [str(i) for i in range(n)], ["p"] * n, ["s"] * n, cands, emb,
        min_gap=0.0, rng=np.random.default_rng(1),
    )  # fmt: skip
    share = float((sel.pairs["cluster"] == 0).mean())
    assert share == pytest.approx(0.5, abs=0.03)
    # cluster 0 prefers x, cluster 1 prefers y: both tastes appear in the data
    assert set(sel.pairs["chosen"].unique()) == {"x", "y"}


def test_prompt_routing_uses_the_prompt_not_a_draw():
    m = model(k=2, routing="prompt")
    cands = [[("x", "g"), ("y", "g")]] * 2
    emb = [np.array([[1.0, -1.0, 0], [-1.0, 1.0, 0]])] * 2
    prompts_emb = np.array([[0.0, 1.0, 0], [1.0, 0.0, 0]])  # routed to clusters 1 and 0
    sel = select_pairs(
        m, ["a", "b"], ["p", "q"], ["s", "s"], cands, emb,
        prompt_embeddings=prompts_emb, rng=np.random.default_rng(0),
    )  # fmt: skip
    assert sel.pairs["cluster"].to_list() == [1, 0]
    assert sel.pairs["chosen"].to_list() == ["y", "x"]


@pytest.mark.parametrize("style", ["standard", "conversational"])
def test_export_writes_a_trl_dataset_card_and_report(tmp_path, style):
    import datasets

    m = model(k=1)
    cands = [[("good", "g1"), ("bad", "g2")]]
    emb = [np.array([[1.0, 0, 0], [-1.0, 0, 0]])]
    sel = select_pairs(m, ["p0"], ["q?"], ["src.jsonl"], cands, emb, rng=np.random.default_rng(0))
    out = export_dataset(
        sel.pairs, tmp_path, report=m.privacy_report, dropped=sel.dropped,
        prompt_sources=["src.jsonl"], private_fingerprint="abc123", style=style,
        formats=["parquet", "jsonl"],
    )  # fmt: skip
    ds = datasets.load_from_disk(str(out / "dataset"))
    assert ds[0]["chosen"] == ("good" if style == "standard" else [
        {"role": "assistant", "content": "good"}
    ])  # fmt: skip
    card = (out / "README.md").read_text()
    assert "(1, 1e-05)-differentially private" in card and "abc123" in card
    assert json.loads((out / "privacy_report.json").read_text())["total"]["epsilon"] == 1.0
    assert (out / "pairs.parquet").exists() and (out / "pairs.jsonl").exists()
