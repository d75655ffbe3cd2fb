"""Trainer configs: TRL-style dataclasses that refuse bad combinations early."""

from __future__ import annotations

import dataclasses

import pytest

from dpprefsyn.train.config import PreferenceTrainingConfig, SFTTrainingConfig


def make(**kw) -> PreferenceTrainingConfig:
    return PreferenceTrainingConfig(output_dir="unused", use_cpu=True, **kw)


def test_defaults_and_help():
    cfg = make()
    assert (cfg.beta, cfg.loss, cfg.epsilon, cfg.precompute_ref_logps) == (0.1, "dpo", None, True)
    assert cfg.bf16 is False  # no CUDA here
    own = {"beta", "loss", "epsilon", "rr_debias", "precompute_ref_logps", "use_lora", "lora_r"}
    helps = {f.name: f.metadata.get("help") for f in dataclasses.fields(cfg)}
    assert all(helps[name] for name in own)
    assert SFTTrainingConfig(output_dir="unused", use_cpu=True).both_responses is False


def test_gradient_checkpointing_is_accepted_without_the_transformers_warning(recwarn):
    cfg = make(gradient_checkpointing=True)
    assert cfg.activation_checkpointing is True
    assert not [w for w in recwarn if "gradient_checkpointing" in str(w.message)]


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"loss": "ppo"}, "loss must be one of"),
        ({"beta": 0.0}, "beta must be positive"),
        ({"loss": "privdpo"}, "needs a finite positive label epsilon"),
        ({"loss": "duchi", "epsilon": -1.0}, "needs a finite positive label epsilon"),
        ({"loss": "privdpo", "epsilon": 1.0, "num_train_epochs": 1.5}, "whole number"),
        ({"loss": "privdpo", "epsilon": 1.0, "max_steps": 3}, "not max_steps"),
        ({"epsilon": 1.0}, "only used by the private losses"),
        ({"rr_debias": True, "loss": "privdpo", "epsilon": 1.0}, "rr_debias applies"),
        ({"max_length": 16, "max_prompt_length": 16}, "max_prompt_length must be in"),
        ({"use_lora": True, "lora_r": 0}, "lora_r and lora_alpha must be positive"),
    ],
)
def test_bad_values_are_rejected(kw, match):
    with pytest.raises(ValueError, match=match):
        make(**kw)
