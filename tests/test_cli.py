"""The CLI end to end: fit on private data, then evaluate and rerank with the data deleted."""

from __future__ import annotations

import json
import shutil

import polars as pl
from typer.testing import CliRunner

from dpprefsyn.cli import app
from pipelines.make_demo_data import make

runner = CliRunner()


def test_fit_then_eval_and_rerank_without_the_private_data(tmp_path, demo_dir, embedding_cache):
    demo = demo_dir
    private = tmp_path / "private.jsonl"
    shutil.copy(demo / "private.jsonl", private)
    held_out = tmp_path / "held_out.jsonl"
    make(tmp_path / "demo2", n_private=80, seed=3)
    shutil.copy(tmp_path / "demo2" / "private.jsonl", held_out)
    cache = embedding_cache
    model_dir = tmp_path / "model"

    res = runner.invoke(
        app,
        [
            "fit", "--private", str(private), "--epsilon", "8", "--out", str(model_dir),
            "--cache-dir", str(cache), "--public-pool", str(demo / "public_candidates.jsonl"),
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "epsilon=8" in res.output
    report = json.loads((model_dir / "privacy_report.json").read_text())
    assert report["total"]["epsilon"] <= 8 + 1e-9

    private.unlink()  # everything after the fit reads only the artifact and public data
    out_json = tmp_path / "eval.json"
    res = runner.invoke(
        app,
        ["eval-reward", "--model", str(model_dir), "--pairs", str(held_out),
         "--json", str(out_json), "--cache-dir", str(cache)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    result = json.loads(out_json.read_text())
    assert result["n"] == 80 and 0.0 <= result["accuracy"] <= 1.0
    assert result["accuracy"] > 0.6  # the demo's tastes are learnable at epsilon 8

    best = tmp_path / "best.jsonl"
    res = runner.invoke(
        app,
        ["rerank", "--model", str(model_dir), "--candidates",
         str(demo / "public_candidates.jsonl"), "--out", str(best), "--n", "8",
         "--cache-dir", str(cache)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    table = pl.read_ndjson(best)
    assert len(table) == 72
    assert (table["n_candidates"] == 8).all()


def test_fit_names_the_bad_record_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"prompt": "p", "chosen": "a", "rejected": "b"})
        + "\n"
        + json.dumps({"prompt": "q", "chosen": "", "rejected": "b"})
        + "\n"
    )
    res = runner.invoke(app, ["fit", "--private", str(bad), "--out", str(tmp_path / "m")])
    assert res.exit_code == 2
    assert "bad.jsonl:1" in res.output and "chosen" in res.output
    assert not (tmp_path / "m").exists()


def test_fit_rejects_a_bad_config_value(tmp_path):
    cfg = tmp_path / "fit.yaml"
    cfg.write_text("projection: sideways\n")
    res = runner.invoke(
        app, ["fit", "--private", "x.jsonl", "--out", str(tmp_path / "m"), "--config", str(cfg)]
    )
    assert res.exit_code == 2
    assert "projection" in res.output


def test_a_repeated_fit_is_reused_and_the_lifetime_budget_holds(
    tmp_path, demo_dir, embedding_cache
):
    """Same data, settings and out: nothing is spent again; a new fit past the budget exits 3."""
    state = tmp_path / "state"
    model_dir = tmp_path / "model"
    args = [
        "fit", "--private", str(demo_dir / "private.jsonl"), "--epsilon", "4",
        "--out", str(model_dir), "--cache-dir", str(embedding_cache),
        "--state-dir", str(state), "--lifetime-epsilon", "6",
    ]  # fmt: skip
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    budgets = list((state / "budgets").glob("*.json"))
    assert len(budgets) == 1
    assert len(json.loads(budgets[0].read_text())["spends"]) == 1

    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "nothing spent" in again.output
    assert len(json.loads(budgets[0].read_text())["spends"]) == 1

    elsewhere = [str(tmp_path / "m2") if a == str(model_dir) else a for a in args]
    other = runner.invoke(app, elsewhere)  # a new fit: 4 more would exceed 6
    assert other.exit_code == 3, other.output
    assert "lifetime budget" in other.output
    assert not (tmp_path / "m2").exists()
