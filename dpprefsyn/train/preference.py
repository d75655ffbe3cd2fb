"""DPO and label-private DPO on ``transformers.Trainer``.

The trainer differs from ``Trainer`` in three places: the loss (:meth:`compute_loss`, the DPO
loss under the configured mechanism), the reference log-probs (scored once by the initial model
before training, or by a frozen copy at every step) and the logged training loss (a function of
the privatised outputs only, see :class:`~dpprefsyn.train.privdpo.PrivatizedLoss`).

Batches come from ``Trainer``'s default sampler, which shuffles: each epoch is one pass over a
random permutation of the pairs in disjoint mini-batches, the setting of the label-DP
accounting in :mod:`dpprefsyn.train.privdpo`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from transformers import Trainer

from dpprefsyn.train.config import PreferenceTrainingConfig
from dpprefsyn.train.data import COLUMNS, REF_COLUMNS, PreferenceCollator, load_preference_dataset
from dpprefsyn.train.forward import dataset_pair_logps, pair_logps
from dpprefsyn.train.losses import dpo_logits
from dpprefsyn.train.modeling import apply_lora, disable_dropout
from dpprefsyn.train.privdpo import PRIVATE_LOSSES, label_epsilon, private_dpo_loss

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback

logger = logging.getLogger(__name__)

NEIGHBOURING_RELATION = (
    "label DP: two datasets are neighbours when one record's preference label is swapped, "
    "(prompt, chosen, rejected) against (prompt, rejected, chosen)"
)


class PreferenceTrainer(Trainer):
    """Train a causal LM on preference pairs with DPO or a label-private variant.

    Parameters
    ----------
    model : PreTrainedModel
        The policy; its initial state is the reference.
    args : PreferenceTrainingConfig or None, default=None
        None uses the defaults, writing to ``dpo-output``.
    train_dataset : datasets.Dataset, str or Path
        Pairs with string columns ``prompt``, ``chosen``, ``rejected``
        (:func:`~dpprefsyn.train.data.load_preference_dataset`).
    processing_class : PreTrainedTokenizerBase
        The policy's tokenizer.
    ref_model : PreTrainedModel or None, default=None
        Reference model; None uses the initial policy. Must not be ``model`` itself.
    eval_dataset : datasets.Dataset, str, Path or None, default=None
        Held-out pairs, scored with the plain DPO loss (no mechanism) by ``evaluate()``.
    callbacks : list of TrainerCallback or None, default=None

    Attributes
    ----------
    ref_model : PreTrainedModel or None
        The frozen reference, kept only when ``precompute_ref_logps=False`` and no LoRA.

    Raises
    ------
    ValueError
        ``ref_model`` is ``model``, or the data lack a column.

    Examples
    --------
    >>> config = PreferenceTrainingConfig(  # doctest: +SKIP
    ...     output_dir="out", loss="privdpo", epsilon=1.0, num_train_epochs=2
    ... )
    >>> trainer = PreferenceTrainer(model, config, train_dataset=pairs, processing_class=tok)
    >>> trainer.train()  # doctest: +SKIP
    >>> trainer.label_epsilon  # doctest: +SKIP
    2.0
    """

    # compute_loss returns a mean over the micro-batch: Trainer divides it by the
    # accumulation steps itself.
    loss_is_scaled_for_ga = False

    def __init__(
        self,
        model: PreTrainedModel,
        args: PreferenceTrainingConfig | None = None,
        *,
        train_dataset: Dataset | str | Path,
        processing_class: PreTrainedTokenizerBase,
        ref_model: PreTrainedModel | None = None,
        eval_dataset: Dataset | str | Path | None = None,
        callbacks: list[TrainerCallback] | None = None,
    ) -> None:
        if args is None:
            args = PreferenceTrainingConfig(output_dir="dpo-output")
        if ref_model is model:
            raise ValueError("ref_model must not be model itself: pass a copy, or None")
        train_dataset = load_preference_dataset(train_dataset)
        if eval_dataset is not None:
            eval_dataset = load_preference_dataset(eval_dataset)
        if args.disable_dropout:
            disable_dropout(model)
        if ref_model is None and not args.precompute_ref_logps and not args.use_lora:
            ref_model = copy.deepcopy(model)
        if ref_model is not None:
            if args.disable_dropout:
                disable_dropout(ref_model)
            ref_model.eval().requires_grad_(False)
        if args.use_lora:
            model = apply_lora(model, r=args.lora_r, alpha=args.lora_alpha)
        collator = PreferenceCollator(
            processing_class, max_length=args.max_length, max_prompt_length=args.max_prompt_length
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
        self.ref_model = None if ref_model is None else ref_model.to(self.args.device)
        self._micro_batch = (-1, 0)  # (optimiser step, micro-batch index within it)
        # The coins' secret: the training seed is public (it shuffles batches), the coins not.
        self._coin_key = (
            args.insecure_coin_seed
            if args.insecure_coin_seed is not None
            else int.from_bytes(os.urandom(16), "little")
        )
        self._loggable: torch.Tensor | None = None
        if args.precompute_ref_logps:
            self.train_dataset = self._with_ref_logps(self.train_dataset)
            if self.eval_dataset is not None:
                self.eval_dataset = self._with_ref_logps(self.eval_dataset)
            self.ref_model = None  # scored once; no need to keep it in memory

    # --- privacy report ----------------------------------------------------------------

    @property
    def label_epsilon(self) -> float:
        """Label epsilon of the configured run: ``epsilon * num_train_epochs``.

        ``inf`` for ``loss="dpo"``, which is not label-private.
        """
        if self.args.loss not in PRIVATE_LOSSES:
            return math.inf
        return label_epsilon(self.args.epsilon, int(self.args.num_train_epochs))

    def privacy_report(self) -> dict[str, Any]:
        """Describe what the run guarantees about the labels, for a JSON file beside the model."""
        private = self.args.loss in PRIVATE_LOSSES
        return {
            "trainer": "preference",
            "loss": self.args.loss,
            "epsilon_per_pass": self.args.epsilon,
            "passes": int(self.args.num_train_epochs),
            "label_epsilon": self.label_epsilon if private else None,
            "label_private": private,
            "neighbouring": NEIGHBOURING_RELATION,
            "composition": (
                "each pass over a random permutation in disjoint mini-batches is "
                "epsilon-label-DP; passes compose linearly: label_epsilon = epsilon x passes"
            ),
            "coin_source": (
                "insecure fixed seed (tests and reproductions only: no guarantee)"
                if self.args.insecure_coin_seed is not None
                else "128 bits of OS entropy, fresh for this run"
            ),
        }

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """Train as ``Trainer.train`` does, then log the run's label epsilon with the metrics."""
        if self.args.loss in PRIVATE_LOSSES:
            logger.info(
                "%s: label epsilon %s per pass x %d passes = %s",
                self.args.loss,
                self.args.epsilon,
                int(self.args.num_train_epochs),
                self.label_epsilon,
            )
        output = super().train(*args, **kwargs)
        if self.args.loss in PRIVATE_LOSSES:
            output.metrics["label_epsilon"] = self.label_epsilon
            self.log({"label_epsilon": self.label_epsilon})
        return output

    # --- reference log-probs -----------------------------------------------------------

    def _with_ref_logps(self, dataset: Dataset) -> Dataset:
        """``dataset`` plus the initial model's completion log-probs of every pair."""
        model = self.ref_model if self.ref_model is not None else self.model
        with self.accelerator.autocast(), _adapter_disabled(model):
            logps = dataset_pair_logps(
                model,
                dataset,
                self.data_collator,
                batch_size=self.args.per_device_eval_batch_size,
            )
        dataset = dataset.select_columns(list(COLUMNS))
        for column, values in zip(REF_COLUMNS, logps.tolist(), strict=True):
            dataset = dataset.add_column(column, values)
        return dataset

    def _reference_logps(self, model: torch.nn.Module, inputs: dict[str, torch.Tensor]):
        if REF_COLUMNS[0] in inputs:
            return torch.stack([inputs[c] for c in REF_COLUMNS])
        if self.args.precompute_ref_logps:
            raise ValueError(
                "this dataset has no precomputed reference log-probs: pass it as eval_dataset "
                "when building the trainer, or use dpprefsyn.train.evaluate"
            )
        with torch.no_grad():
            if self.ref_model is not None:
                return pair_logps(self.ref_model, inputs)
            with _adapter_disabled(model):
                return pair_logps(model, inputs)

    def _coins(self) -> torch.Generator:
        """A generator for one training micro-batch, keyed by a secret, process, step and index.

        Keyed, not running: a single running generator would restart on resume from a
        checkpoint (and repeat on every process), giving other pairs the coins already used. A
        pair whose label the adversary knows would then reveal a coin, and with it the label it
        randomised. Keys are unique within a run. The secret is fresh per trainer (it is
        never written next to the model, which may be published), so a run resumed from a
        checkpoint redraws the coins of the steps it redoes: pairs whose randomised losses were
        already logged in the lost steps are then randomised twice (twice their epsilon).
        """
        step = self.state.global_step
        index = self._micro_batch[1] + 1 if self._micro_batch[0] == step else 0
        self._micro_batch = (step, index)
        key = [self._coin_key, self.args.process_index, step, index]
        seed = np.random.SeedSequence(key).generate_state(1, np.uint64)[0]
        return torch.Generator().manual_seed(int(seed))

    # --- Trainer overrides -------------------------------------------------------------

    def _set_signature_columns_if_needed(self) -> None:
        if self._signature_columns is None:
            self._signature_columns = [*COLUMNS, *REF_COLUMNS]

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, torch.Tensor],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Mean over the batch of the per-example loss under the configured mechanism.

        In eval mode the plain DPO loss is used and no randomness is drawn: evaluation is on
        held-out pairs, not part of the private training run.
        """
        logps = pair_logps(model, inputs)
        ref = self._reference_logps(model, inputs)
        h = dpo_logits(logps[0], logps[1], ref[0], ref[1])
        out = private_dpo_loss(
            h,
            beta=self.args.beta,
            loss=self.args.loss if model.training else "dpo",
            epsilon=self.args.epsilon,
            generator=self._coins() if model.training else torch.Generator(),
            rr_debias=self.args.rr_debias,
        )
        self._loggable = out.loggable.mean()
        loss = out.loss.mean()
        if return_outputs:
            return loss, {"chosen_logps": logps[0], "rejected_logps": logps[1]}
        return loss

    def training_step(
        self,
        model: torch.nn.Module,
        inputs: dict[str, torch.Tensor],
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor:
        """Backpropagate the private loss; report its loggable value, not the loss itself."""
        super().training_step(model, inputs, num_items_in_batch)
        return self._loggable / self.current_gradient_accumulation_steps

    def prediction_step(
        self,
        model: torch.nn.Module,
        inputs: dict[str, torch.Tensor],
        prediction_loss_only: bool,
        ignore_keys: list[str] | None = None,
    ) -> tuple[torch.Tensor, None, None]:
        """DPO loss of a held-out batch; the batch has no ``labels`` for ``Trainer`` to use."""
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            loss = self.compute_loss(model, inputs)
        return loss.detach(), None, None


def _adapter_disabled(model: torch.nn.Module) -> contextlib.AbstractContextManager:
    """Run a PEFT model with its adapter off, i.e. as the reference; a no-op otherwise."""
    from accelerate.utils import is_peft_model

    return model.disable_adapter() if is_peft_model(model) else contextlib.nullcontext()
