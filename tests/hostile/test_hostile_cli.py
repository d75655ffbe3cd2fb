"""Hostile files through ``python -m dpprefsyn fit``: exit code 2 and one line, or a clean fit."""

from __future__ import annotations

import json
import time

import pytest
from hostile_corpus import (
    BAD_LINE,
    BAD_RECORDS,
    CANARY,
    bad_candidate_files,
    huge_text,
    with_bad_record,
)
from typer.testing import CliRunner

from dpprefsyn.cli import app

runner = CliRunner()


@pytest.fixture
def fit(tmp_path, embedding_cache):
    """Run ``fit`` on ``private`` (8 dimensions, fixed noise); return (exit code, output)."""
    config = tmp_path / "fit.yaml"
    config.write_text("n_components: 8\n")

    def invoke(private, *extra: str, epsilon: float = 8.0) -> tuple[int, str]:
        args = [
            "fit", "--private", str(private), "--out", str(tmp_path / "model"),
            "--epsilon", str(epsilon), "--insecure-seed", "0", "--config", str(config),
            "--cache-dir", str(embedding_cache), *extra,
        ]  # fmt: skip
        res = runner.invoke(app, args)
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
        assert "Traceback" not in res.output and CANARY not in res.output
        return res.exit_code, res.output

    return invoke


def _error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, output
    return lines[0]


@pytest.mark.parametrize("kind", ["case_only", "not_utf8"])
def test_a_bad_record_exits_2_naming_record_and_field(kind, demo, fit, tmp_path):
    private = with_bad_record(demo, kind)
    code, output = fit(private)
    assert code == 2
    assert f"record {private.name}:{BAD_LINE}, field '{BAD_RECORDS[kind][1]}'" in _error(output)
    assert not (tmp_path / "model").exists()


def test_a_10_mb_response_fits_quickly(demo, fit, tmp_path):
    rows = demo.records(60)
    rows[5] = {**rows[5], "chosen": huge_text() + " " + rows[5]["chosen"]}
    private = demo.private("huge.jsonl", rows)
    t = time.perf_counter()
    code, output = fit(private, "--public-pool", str(demo.candidates))
    assert code == 0, output
    assert time.perf_counter() - t < 60  # cut before tokenizing: not 30 s and 2 GB a text
    assert (tmp_path / "model" / "model.npz").exists()


def test_a_dataset_too_small_for_epsilon_exits_2_with_the_reason(demo, fit, tmp_path):
    private = demo.private("tiny.jsonl", demo.records(20, start=100))
    code, output = fit(private, epsilon=0.5)
    assert code == 2
    line = _error(output)
    assert "too small for epsilon=0.5" in line and "n~=" in line and "Collect more" in line
    assert "Spent on this decision: epsilon=0.01" in line
    assert not (tmp_path / "model").exists()


def test_paper_preset_below_k_times_batch_is_refused(demo, fit):
    """K=5 clusters of DP-SGD batches of 4 need more than 19 records."""
    private = demo.private("below_k_batch.jsonl", demo.records(19, start=100))
    code, output = fit(private, "--preset", "paper", epsilon=2.0)
    assert code == 2
    assert "too small for epsilon=2" in _error(output)


@pytest.mark.parametrize("kind", ["missing_field", "not_utf8", "not_a_string"])
def test_a_bad_public_pool_exits_2_naming_record_and_field(kind, demo, fit):
    path, record, field = bad_candidate_files(demo)[kind]
    private = demo.private("good.jsonl", demo.records(60))
    code, output = fit(private, "--public-pool", str(path))
    assert code == 2
    assert f"record {record}, field '{field}'" in _error(output)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "no records"),
        (b'{"prompt": "p", "response": "r"}\n{"prompt": ', "not valid JSON"),
        (b'{"prompt": "only one answer", "response": "r"}\n', "two or more distinct"),
    ],
    ids=["empty", "broken_json", "one_answer_a_prompt"],
)
def test_an_unusable_public_pool_exits_2(content, says, demo, fit, tmp_path):
    pool = tmp_path / "pool.jsonl"
    pool.write_bytes(content)
    code, output = fit(demo.private("good.jsonl", demo.records(60)), "--public-pool", str(pool))
    assert code == 2
    assert says in _error(output)


def test_too_few_public_differences_for_the_projection_exits_2(demo, fit, tmp_path):
    """The four-prompt slice gives 40 differences: a 64-dimension projection cannot be fitted."""
    config = tmp_path / "fit64.yaml"
    config.write_text(json.dumps({"n_components": 64}))
    private = demo.private("good.jsonl", demo.records(60))
    code, output = fit(private, "--public-pool", str(demo.candidates), "--config", str(config))
    assert code == 2
    assert "n_components=64" in _error(output)
