"""Configuration of the trainers: one dataclass per family, extending ``TrainingArguments``.

As in TRL (``DPOConfig``, ``SFTConfig``), every ``transformers.TrainingArguments`` field is
available, the defaults that matter here are overridden, and ``__post_init__`` rejects bad
combinations before any model is loaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from transformers import TrainingArguments

from dpprefsyn.train.privdpo import LOSSES, PRIVATE_LOSSES


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@dataclass
class _ModelTrainingConfig(TrainingArguments):
    """Fields shared by the SFT and preference configs; see the subclasses."""

    # Overridden TrainingArguments defaults
    logging_steps: float = field(
        default=10, metadata={"help": "Log every this many optimiser steps."}
    )
    bf16: bool | None = field(
        default=None,
        metadata={"help": "Train in bfloat16 mixed precision. None: True when CUDA is available."},
    )
    save_strategy: str = field(
        default="no",
        metadata={
            "help": "Checkpointing: 'no' (the trained model is saved at the end) or 'steps'."
        },
    )

    # Data
    max_length: int | None = field(
        default=1024,
        metadata={"help": "Longest prompt + response in tokens; longer ones lose their end."},
    )
    max_prompt_length: int | None = field(
        default=512,
        metadata={"help": "Longest prompt in tokens; longer prompts lose their beginning."},
    )

    # Model
    use_lora: bool = field(
        default=False,
        metadata={"help": "Train a LoRA adapter (needs peft) instead of all weights."},
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling numerator (alpha / r)."})
    disable_dropout: bool = field(
        default=True,
        metadata={"help": "Turn dropout off, so that a pair's log-probs are deterministic."},
    )

    def __post_init__(self) -> None:
        """Resolve ``bf16``, map ``gradient_checkpointing`` and check lengths and LoRA."""
        if self.bf16 is None:
            self.bf16 = not self.fp16 and _cuda_available()
        # TRL users set `gradient_checkpointing`; transformers 5 renamed it, warning on the old.
        if self.gradient_checkpointing is not None and self.activation_checkpointing is None:
            self.activation_checkpointing, self.gradient_checkpointing = (
                self.gradient_checkpointing,
                None,
            )
        if self.max_length is not None and self.max_length < 2:
            raise ValueError(f"max_length must be at least 2, got {self.max_length}")
        if (
            self.max_length is not None
            and self.max_prompt_length is not None
            and not 0 < self.max_prompt_length < self.max_length
        ):
            raise ValueError(
                f"max_prompt_length must be in (0, max_length={self.max_length}) so that some "
                f"response is left, got {self.max_prompt_length}"
            )
        if self.use_lora and not (self.lora_r > 0 and self.lora_alpha > 0):
            raise ValueError(
                f"lora_r and lora_alpha must be positive, got {self.lora_r}, {self.lora_alpha}"
            )
        super().__post_init__()


@dataclass
class SFTTrainingConfig(_ModelTrainingConfig):
    r"""Configuration of :class:`~dpprefsyn.train.sft.SFTTrainer`.

    Parameters
    ----------
    both_responses : bool, default=False
        PrivSFT: train on the chosen and the rejected response alike, with the token-mean loss
        over both. The objective is then symmetric in the pair, so it reveals nothing about which
        response was preferred (label-epsilon 0). False trains on ``chosen`` only.
    learning_rate : float, default=2e-5
    max_length : int or None, default=1024
    max_prompt_length : int or None, default=512
    use_lora : bool, default=False
    lora_r : int, default=16
    lora_alpha : int, default=32
    disable_dropout : bool, default=False
    bf16 : bool or None, default=None
        None becomes True when CUDA is available.

    All other ``transformers.TrainingArguments`` fields apply unchanged.
    """

    learning_rate: float = field(default=2e-5, metadata={"help": "Initial AdamW learning rate."})
    both_responses: bool = field(
        default=False,
        metadata={
            "help": "PrivSFT: train on chosen and rejected alike, so SFT reveals no preference."
        },
    )
    disable_dropout: bool = field(
        default=False, metadata={"help": "Turn dropout off during training."}
    )


@dataclass
class PreferenceTrainingConfig(_ModelTrainingConfig):
    r"""Configuration of :class:`~dpprefsyn.train.preference.PreferenceTrainer`.

    Parameters
    ----------
    beta : float, default=0.1
        DPO temperature: the implicit reward is ``beta * log(pi / pi_ref)``.
    loss : {"dpo", "privdpo", "rr-dpo", "duchi", "piecewise"}, default="dpo"
        ``dpo`` is the sigmoid DPO loss; the others are label-private
        (:mod:`dpprefsyn.train.privdpo`).
    epsilon : float or None, default=None
        Label epsilon of one pass, required by the private losses and refused by ``dpo``. The
        run's label epsilon is ``epsilon * num_train_epochs``.
    rr_debias : bool, default=False
        ``rr-dpo`` only: the unbiased loss for flipped labels instead of DPO on them.
    insecure_coin_seed : int or None, default=None
        Fix the private losses' coins (tests and reproductions only). None draws 128 bits of
        OS entropy per run: coins derived from the public training ``seed`` alone could be
        recomputed by anyone, undoing the label noise.
    precompute_ref_logps : bool, default=True
        Score the training pairs with the initial model once, before training, instead of
        keeping a frozen copy in memory and running it at every step.
    learning_rate : float, default=1e-6
    num_train_epochs : int, default=1
        Whole passes only: the label budget is spent per pass.
    max_length : int or None, default=1024
    max_prompt_length : int or None, default=512
    use_lora : bool, default=False
    lora_r : int, default=16
    lora_alpha : int, default=32
    disable_dropout : bool, default=True
    bf16 : bool or None, default=None
        None becomes True when CUDA is available.

    All other ``transformers.TrainingArguments`` fields apply unchanged, except ``max_steps``,
    which private losses refuse (a partial pass has no simpler accounting than a whole one).
    """

    learning_rate: float = field(default=1e-6, metadata={"help": "Initial AdamW learning rate."})
    num_train_epochs: float = field(
        default=1, metadata={"help": "Passes over the data; whole numbers for private losses."}
    )

    # Loss
    beta: float = field(
        default=0.1, metadata={"help": "DPO temperature of the implicit reward beta*log(pi/ref)."}
    )
    loss: str = field(
        default="dpo",
        metadata={"help": "One of dpo, privdpo, rr-dpo, duchi, piecewise.", "choices": LOSSES},
    )
    epsilon: float | None = field(
        default=None,
        metadata={"help": "Label epsilon per pass; required by private losses, refused by dpo."},
    )
    rr_debias: bool = field(
        default=False, metadata={"help": "rr-dpo only: unbiased loss for randomised labels."}
    )
    insecure_coin_seed: int | None = field(
        default=None,
        metadata={"help": "Fix the label-noise coins (tests only: no guarantee if known)."},
    )
    precompute_ref_logps: bool = field(
        default=True,
        metadata={"help": "Score the pairs with the initial model once instead of every step."},
    )

    def __post_init__(self) -> None:
        """Check the loss, its epsilon and the pass count before any model is loaded."""
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if not self.beta > 0:
            raise ValueError(f"beta must be positive, got {self.beta}")
        if self.loss in PRIVATE_LOSSES:
            if self.epsilon is None or not (0 < self.epsilon < math.inf):
                raise ValueError(
                    f"loss {self.loss!r} needs a finite positive label epsilon, got {self.epsilon}"
                )
            if self.num_train_epochs != int(self.num_train_epochs) or self.num_train_epochs < 1:
                raise ValueError(
                    "private losses spend epsilon per whole pass: num_train_epochs must be a "
                    f"positive whole number, got {self.num_train_epochs}"
                )
            if self.max_steps > 0:
                raise ValueError(
                    "private losses are accounted per whole pass: set num_train_epochs, not "
                    f"max_steps (got {self.max_steps})"
                )
        elif self.epsilon is not None:
            raise ValueError(
                f"epsilon is only used by the private losses {PRIVATE_LOSSES}; loss='dpo' is "
                "not label-private"
            )
        if self.rr_debias and self.loss != "rr-dpo":
            raise ValueError(f"rr_debias applies to loss='rr-dpo' only, got loss={self.loss!r}")
        super().__post_init__()
