"""``python -m dpprefsyn train``: the trainers behind the CLI."""

from __future__ import annotations

import json

from tiny_models import build_tiny_causal_lm
from typer.testing import CliRunner

from dpprefsyn.cli import app

runner = CliRunner()


def pairs_file(tmp_path):
    rows = [
        {"prompt": f"question {i}", "chosen": "a good answer", "rejected": "a bad answer"}
        for i in range(8)
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_train_privdpo_reports_label_epsilon(tmp_path):
    model = build_tiny_causal_lm(tmp_path / "tiny")
    cfg = tmp_path / "train.yaml"
    cfg.write_text("per_device_train_batch_size: 4\nnum_train_epochs: 2\nreport_to: []\n")
    res = runner.invoke(
        app,
        ["train", "privdpo", "--data", str(pairs_file(tmp_path)), "--model", str(model),
         "--out", str(tmp_path / "out"), "--epsilon", "1.0", "--config", str(cfg)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    privacy = json.loads((tmp_path / "out" / "privacy.json").read_text())
    assert privacy["label_epsilon"] == 2.0  # one pass costs epsilon; passes add up


def test_train_refuses_bad_requests(tmp_path):
    data = str(pairs_file(tmp_path))
    res = runner.invoke(app, ["train", "rlhf", "--data", data, "--model", "m", "--out", "o"])
    assert res.exit_code == 2 and "unknown kind" in res.output
    res = runner.invoke(app, ["train", "privdpo", "--data", data, "--model", "m", "--out", "o"])
    assert res.exit_code == 2 and "epsilon" in res.output
    res = runner.invoke(app, ["train", "ppo", "--data", data, "--model", "m", "--out", "o"])
    assert res.exit_code == 2 and "reward-model" in res.output
