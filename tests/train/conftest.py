"""Fixtures for the trainer tests: one tiny GPT-2 on disk and a 16-pair dataset."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

PROMPTS = (
    "the quick brown fox",
    "write a poem about",
    "explain why the sky",
    "what is the capital of france ?",
)
CHOSEN = (" jumps over the lazy dog .", " the sea and the sky .", " is blue .", " paris .")
REJECTED = (
    " is blue in one sentence .",
    " paris is the capital .",
    " a good answer .",
    " the sea .",
)


def preference_rows(n: int, offset: int = 0) -> dict[str, list[str]]:
    """``n`` pairs cycling through a few prompts; ``offset`` shifts which ones come first."""
    idx = [(i + offset) % len(PROMPTS) for i in range(n)]
    return {
        "prompt": [PROMPTS[i] for i in idx],
        "chosen": [CHOSEN[i] for i in idx],
        "rejected": [REJECTED[(i + 1) % len(REJECTED)] for i in idx],
    }


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm"))


@pytest.fixture(scope="session")
def _loaded(tiny_model_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(
        tiny_model_dir
    )


@pytest.fixture
def tiny_model(_loaded):
    """A fresh copy of the tiny model, in eval mode with dropout off."""
    model = copy.deepcopy(_loaded[0])
    from dpprefsyn.train.modeling import disable_dropout

    disable_dropout(model)
    return model.eval()


@pytest.fixture
def tokenizer(_loaded):
    return _loaded[1]


@pytest.fixture
def pairs():
    from datasets import Dataset

    return Dataset.from_dict(preference_rows(16))
