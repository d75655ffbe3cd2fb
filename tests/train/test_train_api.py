"""End to end: SFT then DPO through ``train()``, and the label epsilon it reports."""

from __future__ import annotations

import json
import math

import pytest
import torch
from transformers import AutoModelForCausalLM

from dpprefsyn.train import train
from dpprefsyn.train.evaluate import membership_inference, preference_metrics

FAST = {
    "use_cpu": True,
    "per_device_train_batch_size": 4,
    "max_length": 32,
    "max_prompt_length": 12,
    "learning_rate": 1e-3,
    "disable_tqdm": True,
    "report_to": [],
}


def test_sft_then_dpo_then_privdpo(tiny_model_dir, tokenizer, pairs, tmp_path):
    sft = train("privsft", pairs, tiny_model_dir, tmp_path / "sft", config=FAST)
    assert json.loads((sft / "privacy.json").read_text())["label_epsilon"] == 0.0

    dpo = train("dpo", pairs, sft, tmp_path / "dpo", config={**FAST, "max_steps": 2})
    assert (dpo / "config.json").is_file() and (dpo / "tokenizer_config.json").is_file()
    assert json.loads((dpo / "privacy.json").read_text())["label_private"] is False
    AutoModelForCausalLM.from_pretrained(dpo)

    pairs.to_json(tmp_path / "pairs.jsonl")
    priv = train(
        "privdpo",
        tmp_path / "pairs.jsonl",
        sft,
        tmp_path / "priv",
        epsilon=0.5,
        config={**FAST, "num_train_epochs": 2},
    )
    report = json.loads((priv / "privacy.json").read_text())
    assert report["label_epsilon"] == pytest.approx(0.5 * 2)
    assert report["passes"] == 2 and report["loss"] == "privdpo"


def test_privdpo_baselines_and_lora_through_train(tiny_model_dir, pairs, tmp_path):
    pytest.importorskip("peft")
    out = train(
        "privdpo",
        pairs.select(range(8)),
        tiny_model_dir,
        tmp_path / "duchi",
        epsilon=2.0,
        config={**FAST, "loss": "duchi", "use_lora": True, "lora_r": 4},
    )
    report = json.loads((out / "privacy.json").read_text())
    assert report["loss"] == "duchi" and report["label_epsilon"] == 2.0
    model = AutoModelForCausalLM.from_pretrained(out)  # LoRA merged: a plain model
    assert not any("lora" in name for name, _ in model.named_parameters())


@pytest.mark.parametrize(
    ("kind", "kw", "match"),
    [
        ("ppo", {}, "kind must be one of"),
        ("dpo", {"epsilon": 1.0}, "epsilon applies to kind='privdpo'"),
        ("privsft", {"epsilon": 1.0}, "epsilon applies to kind='privdpo'"),
        ("privdpo", {}, "needs a finite positive label epsilon"),
        ("privdpo", {"epsilon": 1.0, "config": {"loss": "dpo"}}, "takes a loss in"),
        ("dpo", {"config": {"loss": "duchi"}}, "kind='dpo' trains"),
        ("sft", {"config": {"both_responses": True}}, "must not set 'both_responses'"),
    ],
)
def test_train_rejects_contradictions(tiny_model_dir, pairs, tmp_path, kind, kw, match):
    with pytest.raises(ValueError, match=match):
        train(kind, pairs, tiny_model_dir, tmp_path / "out", **kw)


class Boosted(torch.nn.Module):
    """``model`` with a bonus on the logits of ``ids``."""

    def __init__(self, model: torch.nn.Module, ids: list[int]) -> None:
        super().__init__()
        self.model, self.ids = model, ids

    def forward(self, **kwargs):
        out = self.model(**kwargs)
        out.logits[..., self.ids] += 2.0
        return out


def test_metrics_and_membership_attack(tiny_model, tokenizer, pairs):
    ref = tiny_model
    same = preference_metrics(ref, ref, tokenizer, pairs, beta=0.1, max_length=32)
    assert same["reward_margin"] == 0.0 and same["reward_accuracy"] == 0.5  # all ties
    assert same["dpo_loss"] == pytest.approx(math.log(2))
    # Non-members: the same responses with the labels swapped, so only the label differs.
    unseen = pairs.rename_columns({"chosen": "rejected", "rejected": "chosen"})
    null = membership_inference(ref, ref, tokenizer, pairs, unseen, beta=0.1, max_length=32)
    assert null["auc"] == 0.5 and null["n_members"] == 16

    # A policy that memorised the training labels: more mass on words only chosen responses use.
    chosen_words = {w for text in pairs["chosen"] for w in text.split()}
    rejected_words = {w for text in pairs["rejected"] for w in text.split()}
    policy = Boosted(ref, tokenizer.convert_tokens_to_ids(sorted(chosen_words - rejected_words)))
    metrics = preference_metrics(policy, ref, tokenizer, pairs, beta=0.1, max_length=32)
    assert metrics["reward_margin"] > 0 and metrics["reward_accuracy"] == 1.0
    attack = membership_inference(policy, ref, tokenizer, pairs, unseen, beta=0.1, max_length=32)
    assert attack["auc"] == 1.0 and attack["advantage"] == 1.0
