"""Win rate with a local judge: generation on real tiny models, label-probability reading, CLI."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tiny_models import build_tiny_causal_lm
from typer.testing import CliRunner

from dpprefsyn.cli import app
from dpprefsyn.train.generation import generate_with_model
from dpprefsyn.train.judge import LocalJudge, fill_template
from dpprefsyn.train.pairwise_stats import confidence_interval
from dpprefsyn.train.winrate import RECORDS_FILE, SUMMARY_FILE, WinRateConfig, win_rate

PROMPTS = [
    "the quick brown fox",
    "write a poem about the sea",
    "explain why the sky is blue",
    "what is the capital of france ?",
]
LABELS = ["a", "the"]  # the tiny word-level vocabulary has no "A" or "B"
FIELDS = {
    "max_new_tokens": 6,
    "temperature": 1.0,  # greedy decoding of a random tiny model says nothing at all
    "labels": LABELS,
    "progress": False,
    "n_bootstrap": 200,
}


@pytest.fixture(scope="module")
def baseline_dir(tmp_path_factory):
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-baseline"), seed=1)


@pytest.fixture
def cfg():
    return WinRateConfig(**FIELDS)


class FavourLabel(torch.nn.Module):
    """A stand-in judge model whose next-token odds of label A to label B are ``odds``: 1."""

    def __init__(self, vocab_size: int, id_a: int, id_b: int, odds: float) -> None:
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(()))  # gives the judge a device
        self.logits = torch.full((vocab_size,), -30.0)
        self.logits[id_a], self.logits[id_b] = float(np.log(odds)), 0.0

    def forward(self, input_ids, attention_mask):
        return SimpleNamespace(logits=self.logits.expand(*input_ids.shape, -1))


class PrefersAnswers:
    """A stand-in judge: the answer that is one of ``favoured`` wins."""

    def __init__(self, favoured: list[str]) -> None:
        self.favoured = set(favoured)

    def prob_first_better(self, instructions, first, second):
        return np.array(
            [
                0.5 + 0.5 * ((a in self.favoured) - (b in self.favoured))
                for a, b in zip(first, second, strict=True)
            ]
        )


def test_runner_end_to_end(tmp_path, tiny_model_dir, baseline_dir, cfg):
    report = win_rate(PROMPTS, tiny_model_dir, baseline_dir, tiny_model_dir, tmp_path, config=cfg)
    records = [json.loads(line) for line in (tmp_path / RECORDS_FILE).read_text().splitlines()]
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert records == report.records and summary["n"] == len(records) == len(PROMPTS)
    assert [r["prompt"] for r in records] == PROMPTS
    assert all(r["policy"] and not r["identical"] for r in records)  # sampled: words
    for r in records:  # the order-averaged verdict, and the labels' share of the judge's mass
        assert r["win"] == pytest.approx((r["p_a_policy_first"] + 1 - r["p_a_policy_second"]) / 2)
        assert 0 < r["label_mass"] < 1
    # A random judge has no opinion on content; whatever its position bias, it cancels.
    assert summary["win_rate"] == pytest.approx(0.5, abs=0.02)
    low, high = summary["ci"]
    assert 0 <= low <= summary["win_rate"] <= high <= 1
    assert summary["wins"] + summary["ties"] + summary["losses"] == len(PROMPTS)
    assert {"policy_words", "baseline_words", "note"} <= set(summary["lengths"])
    assert summary["backend"] == "transformers" and summary["config"]["labels"] == LABELS


def test_judge_reads_label_probabilities(tiny_model_dir, tokenizer, tiny_model):
    ids = [tokenizer.convert_tokens_to_ids(label) for label in LABELS]
    stub = FavourLabel(len(tokenizer), *ids, odds=3.0)
    p, mass = LocalJudge(stub, tokenizer, labels=LABELS).scores(["q"], ["x"], ["y"])
    assert p == pytest.approx([0.75]) and mass == pytest.approx([1.0], abs=1e-6)

    # A real model: batched, right-padded reading equals one text at a time and the softmax.
    texts = [fill_template("{instruction}{output_a}{output_b}", p, p, "") for p in PROMPTS]
    batched = LocalJudge(tiny_model, tokenizer, labels=LABELS, batch_size=4)
    single = LocalJudge(tiny_model, tokenizer, labels=LABELS, batch_size=1)
    p_batched, _ = batched.label_probabilities(texts)
    np.testing.assert_allclose(p_batched, single.label_probabilities(texts)[0], atol=1e-5)
    with torch.no_grad():
        probs = tiny_model(**tokenizer(texts[0], return_tensors="pt")).logits[0, -1].softmax(-1)
    assert p_batched[0] == pytest.approx((probs[ids[0]] / probs[ids].sum()).item(), abs=1e-5)


def test_position_bias_cancels_and_a_real_preference_counts(
    tiny_model_dir, baseline_dir, tokenizer, cfg
):
    ids = [tokenizer.convert_tokens_to_ids(label) for label in LABELS]
    always_a = LocalJudge(FavourLabel(len(tokenizer), *ids, odds=1e4), tokenizer, labels=LABELS)
    biased_report = win_rate(PROMPTS, tiny_model_dir, baseline_dir, always_a, config=cfg)
    biased, biased_records = biased_report.summary, biased_report.records
    assert biased["win_rate"] == pytest.approx(0.5, abs=1e-3)
    assert biased["ties"] == len(PROMPTS) and biased["position_bias"] > 0.99
    assert biased["order_agreement"] == 0.0

    # The judge prefers what the policy writes: generated again, the same answers come out.
    from transformers import AutoModelForCausalLM

    policy = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    favoured = generate_with_model(policy, tokenizer, PROMPTS, cfg, desc="policy")
    baseline = [r["baseline"] for r in biased_records]
    report = win_rate(PROMPTS, tiny_model_dir, baseline, PrefersAnswers(favoured), config=cfg)
    assert [r["policy"] for r in report.records] == favoured
    assert report.summary["win_rate"] == report.summary["win_rate_discrete"] == 1.0
    assert report.summary["wins"] == len(PROMPTS) and report.summary["ci"] == [1.0, 1.0]


def test_identical_answers_are_ties_without_a_judge(tiny_model_dir):
    class Refuses:
        def prob_first_better(self, *args):
            raise AssertionError("identical answers need no judge")

    greedy = WinRateConfig(**{**FIELDS, "temperature": 0.0})  # one model, greedy: same answers
    report = win_rate(PROMPTS, tiny_model_dir, tiny_model_dir, Refuses(), config=greedy)
    summary = report.summary
    assert summary["win_rate"] == summary["win_rate_discrete"] == 0.5
    assert summary["ties"] == summary["identical"] == len(PROMPTS)
    assert all(r["p_a_policy_first"] is None for r in report.records)


def test_cli_with_an_answers_file_as_baseline(tmp_path, tiny_model_dir):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    answers = [f"answer {i} is short ." for i in range(len(PROMPTS))]
    reference = tmp_path / "reference.jsonl"
    rows = [{"prompt": p, "response": a} for p, a in zip(PROMPTS, answers, strict=True)]
    reference.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = tmp_path / "winrate.yaml"
    config.write_text(json.dumps(FIELDS))  # JSON is YAML
    out = tmp_path / "wr"
    res = CliRunner().invoke(
        app,
        ["winrate", "--policy", str(tiny_model_dir), "--baseline", str(reference),
         "--judge", str(tiny_model_dir), "--prompts", str(prompts), "--out", str(out),
         "--n", "3", "--config", str(config)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "win rate" in res.output and "words" in res.output
    records = [json.loads(line) for line in (out / RECORDS_FILE).read_text().splitlines()]
    assert [r["baseline"] for r in records] == answers[:3]
    assert json.loads((out / SUMMARY_FILE).read_text())["baseline"] == str(reference)


def test_bad_inputs_fail_clearly(tmp_path, tiny_model_dir, tokenizer, tiny_model):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": PROMPTS[0]}) + "\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    partial = tmp_path / "partial.jsonl"
    partial.write_text(json.dumps({"prompt": "another prompt", "response": "yes"}) + "\n")
    model = str(tiny_model_dir)

    def run(*args):
        base = ["winrate", "--policy", model, "--judge", model, "--out", str(tmp_path / "o")]
        return CliRunner().invoke(app, [*base, *args])

    cases = [
        (["--prompts", str(empty), "--baseline", model], "no records"),
        (["--prompts", str(prompts), "--baseline", str(tmp_path / "none.json")], "no such"),
        (["--prompts", str(prompts), "--baseline", str(partial)], "1 of 1 prompts have no"),
        (["--prompts", str(prompts), "--baseline", model, "--n", "0"], "limit"),
        (["--prompts", str(prompts), "--baseline", model], "label 'A' is not a single token"),
    ]
    for args, message in cases:
        res = run(*args)
        assert res.exit_code == 2 and message in res.output, (args, res.output)
    bad = tmp_path / "bad.yaml"
    bad.write_text("judge_template: 'no fields here'\n")
    res = run("--prompts", str(prompts), "--baseline", model, "--config", str(bad))
    assert res.exit_code == 2 and "{instruction}" in res.output

    with pytest.raises(ValueError, match="not a single token"):
        LocalJudge(tiny_model, tokenizer)  # "A" and "B" are unknown words to the tiny vocabulary
    with pytest.raises(ValueError, match="no prompts"):
        win_rate([], [], [], PrefersAnswers([]))
    with pytest.raises(ValueError, match="backend"):
        WinRateConfig(backend="tgi")


def test_confidence_intervals():
    scores = np.array([0.0, 1.0] * 50)
    low, high = confidence_interval(scores, method="normal")
    assert (low + high) / 2 == pytest.approx(0.5) and high - low == pytest.approx(0.197, abs=1e-3)
    b_low, b_high = confidence_interval(scores, method="bootstrap", n_bootstrap=2000, seed=0)
    assert b_low == pytest.approx(low, abs=0.02) and b_high == pytest.approx(high, abs=0.02)
    assert confidence_interval(np.array([0.7])) == (0.7, 0.7)
