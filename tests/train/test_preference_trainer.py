"""PreferenceTrainer and SFTTrainer on a tiny GPT-2: reference log-probs, logging, LoRA."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from dpprefsyn.train.config import PreferenceTrainingConfig, SFTTrainingConfig
from dpprefsyn.train.preference import PreferenceTrainer
from dpprefsyn.train.sft import SFTTrainer

FAST = {
    "use_cpu": True,
    "per_device_train_batch_size": 4,
    "per_device_eval_batch_size": 8,
    "max_length": 32,
    "max_prompt_length": 12,
    "learning_rate": 1e-3,
    "logging_steps": 1,
    "disable_tqdm": True,
    "report_to": [],
}


def config(tmp_path, **kw) -> PreferenceTrainingConfig:
    return PreferenceTrainingConfig(output_dir=str(tmp_path), **{**FAST, **kw})


def first_batch(trainer: PreferenceTrainer) -> dict[str, torch.Tensor]:
    return trainer.data_collator([trainer.train_dataset[i] for i in range(4)])


def test_precomputed_and_live_reference_give_the_same_loss(tiny_model, tokenizer, pairs, tmp_path):
    policy = copy.deepcopy(tiny_model)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0)))
    live = PreferenceTrainer(
        copy.deepcopy(policy),
        config(tmp_path, precompute_ref_logps=False),
        train_dataset=pairs,
        processing_class=tokenizer,
        ref_model=copy.deepcopy(tiny_model),
    )
    pre = PreferenceTrainer(
        copy.deepcopy(policy),
        config(tmp_path),
        train_dataset=pairs,
        processing_class=tokenizer,
        ref_model=copy.deepcopy(tiny_model),
    )
    assert pre.ref_model is None and "ref_chosen_logps" in pre.train_dataset.column_names
    with torch.no_grad():
        a = live.compute_loss(live.model.eval(), first_batch(live))
        b = pre.compute_loss(pre.model.eval(), first_batch(pre))
    assert a.item() == pytest.approx(b.item(), abs=1e-6)
    assert abs(a.item() - math.log(2)) > 1e-3


def test_ref_model_must_not_be_the_policy(tiny_model, tokenizer, pairs, tmp_path):
    with pytest.raises(ValueError, match="ref_model must not be model"):
        PreferenceTrainer(
            tiny_model,
            config(tmp_path),
            train_dataset=pairs,
            processing_class=tokenizer,
            ref_model=tiny_model,
        )


def test_privdpo_trains_logs_a_released_loss_and_evaluates(tiny_model, tokenizer, pairs, tmp_path):
    cfg = config(tmp_path, loss="privdpo", epsilon=1.0, num_train_epochs=2)
    trainer = PreferenceTrainer(
        tiny_model,
        cfg,
        train_dataset=pairs,
        eval_dataset=pairs.select(range(4)),
        processing_class=tokenizer,
    )
    before = [p.detach().clone() for p in tiny_model.parameters()]
    assert trainer.train().metrics["label_epsilon"] == 2.0
    assert any(not torch.equal(a, p) for a, p in zip(before, tiny_model.parameters(), strict=True))
    assert trainer.state.log_history[-1]["label_epsilon"] == 2.0
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 8 and all(math.isfinite(x) and x > 0 for x in losses)
    assert trainer.label_epsilon == 2.0
    report = trainer.privacy_report()
    assert report["label_epsilon"] == 2.0 and report["passes"] == 2
    metrics = trainer.evaluate()
    assert math.isfinite(metrics["eval_loss"])


def test_lora_uses_the_adapter_free_model_as_reference(tiny_model, tokenizer, pairs, tmp_path):
    pytest.importorskip("peft")
    cfg = config(tmp_path, use_lora=True, lora_r=4, lora_alpha=8, precompute_ref_logps=False)
    trainer = PreferenceTrainer(tiny_model, cfg, train_dataset=pairs, processing_class=tokenizer)
    assert trainer.ref_model is None
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.model.eval(), first_batch(trainer))
    assert loss.item() == pytest.approx(math.log(2), abs=1e-6)  # fresh adapter = reference
    trainer.train()
    with torch.no_grad():
        assert (
            trainer.compute_loss(trainer.model.eval(), first_batch(trainer)).item() != loss.item()
        )


def test_sft_loss_is_token_mean_nll_on_responses(tiny_model, tokenizer, pairs, tmp_path):
    cfg = SFTTrainingConfig(output_dir=str(tmp_path), both_responses=True, **FAST)
    trainer = SFTTrainer(tiny_model, cfg, train_dataset=pairs, processing_class=tokenizer)
    batch = trainer.data_collator([pairs[i] for i in range(4)])
    with torch.no_grad():
        loss = trainer.compute_loss(tiny_model, batch).item()
        logits = tiny_model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).logits
    targets = batch["labels"][:, 1:]
    nll = torch.nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), targets, reduction="none"
    )
    mask = targets != -100
    assert loss == pytest.approx((nll[mask].sum() / mask.sum()).item(), rel=1e-5)
    assert trainer.label_epsilon == 0.0


def test_coins_are_keyed_by_step_and_micro_batch(tiny_model, tokenizer, pairs, tmp_path):
    """Fresh coins for every micro-batch; the same ones only for the same insecure seed.

    The public training seed alone must not determine the coins: two trainers with the same
    ``seed`` and no ``insecure_coin_seed`` draw different ones.
    """

    def draws(trainer: PreferenceTrainer, steps: int, micro: int) -> list[float]:
        out = []
        for step in range(steps):
            trainer.state.global_step = step
            out += [torch.rand(1, generator=trainer._coins()).item() for _ in range(micro)]
        return out

    def trainer(**kwargs) -> PreferenceTrainer:
        cfg = config(tmp_path, loss="privdpo", epsilon=1.0, **kwargs)
        model = copy.deepcopy(tiny_model)
        return PreferenceTrainer(model, cfg, train_dataset=pairs, processing_class=tokenizer)

    first = draws(trainer(insecure_coin_seed=7), 3, 2)
    assert len(set(first)) == 6
    assert draws(trainer(insecure_coin_seed=7), 3, 2) == first
    secure = trainer()
    assert draws(secure, 3, 2) != draws(trainer(), 3, 2)
    assert "OS entropy" in secure.privacy_report()["coin_source"]
