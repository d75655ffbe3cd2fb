"""Supervised fine-tuning on preference data: SFT on ``chosen``, or PrivSFT on both responses.

The loss is the model's own causal-LM loss on response tokens (prompt and padding labelled
-100): the token-mean negative log-likelihood, normalised over all response tokens of the
accumulated batch by ``Trainer``. TRL's ``SFTTrainer`` would do the same, but it would also
rewrite the data (its own EOS, completion masks, packing options); a collator of our own keeps
the tokenisation identical to :class:`~dpprefsyn.train.preference.PreferenceTrainer`'s.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import Trainer

from dpprefsyn.train.config import SFTTrainingConfig
from dpprefsyn.train.data import COLUMNS, SFTCollator, load_preference_dataset
from dpprefsyn.train.modeling import apply_lora, disable_dropout

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback


class SFTTrainer(Trainer):
    """Fine-tune a causal LM on the responses of preference pairs.

    Parameters
    ----------
    model : PreTrainedModel
    args : SFTTrainingConfig or None, default=None
        None uses the defaults, writing to ``sft-output``.
    train_dataset : datasets.Dataset, str or Path
        Pairs with string columns ``prompt``, ``chosen``, ``rejected``.
    processing_class : PreTrainedTokenizerBase
    eval_dataset : datasets.Dataset, str, Path or None, default=None
    callbacks : list of TrainerCallback or None, default=None

    Notes
    -----
    **Privacy.** With ``both_responses=True`` (PrivSFT) the objective is the same whichever
    response was preferred, so the trained model is independent of the labels: label-epsilon 0.
    SFT on ``chosen`` only is not label-private: it is trained on the preferred response.
    Neither protects the prompts or responses themselves.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        args: SFTTrainingConfig | None = None,
        *,
        train_dataset: Dataset | str | Path,
        processing_class: PreTrainedTokenizerBase,
        eval_dataset: Dataset | str | Path | None = None,
        callbacks: list[TrainerCallback] | None = None,
    ) -> None:
        if args is None:
            args = SFTTrainingConfig(output_dir="sft-output")
        train_dataset = load_preference_dataset(train_dataset)
        if eval_dataset is not None:
            eval_dataset = load_preference_dataset(eval_dataset)
        if args.disable_dropout:
            disable_dropout(model)
        if args.use_lora:
            model = apply_lora(model, r=args.lora_r, alpha=args.lora_alpha)
        collator = SFTCollator(
            processing_class,
            max_length=args.max_length,
            max_prompt_length=args.max_prompt_length,
            both_responses=args.both_responses,
        )
        super().__init__(
            model=model,
            args=args,
            data_collator=collator,
            train_dataset=train_dataset,
            eval_dataset=eval_dataset,
            processing_class=processing_class,
            callbacks=callbacks,
        )

    @property
    def label_epsilon(self) -> float:
        """0 for PrivSFT (label-independent objective); ``inf`` for SFT on ``chosen``."""
        return 0.0 if self.args.both_responses else math.inf

    def privacy_report(self) -> dict[str, Any]:
        """Describe what the run guarantees about the labels, for a JSON file beside the model."""
        private = self.args.both_responses
        return {
            "trainer": "sft",
            "both_responses": private,
            "label_epsilon": 0.0 if private else None,
            "label_private": private,
            "reason": (
                "trained on chosen and rejected alike: the model does not depend on the labels"
                if private
                else "trained on the chosen responses only: the labels are used as-is"
            ),
        }

    def _set_signature_columns_if_needed(self) -> None:
        if self._signature_columns is None:
            self._signature_columns = list(COLUMNS)
