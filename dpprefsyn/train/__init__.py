"""Trainers that fine-tune a model on (synthetic) preference data: SFT, DPO and label-private DPO.

Modules, one idea each: :mod:`~.losses` (DPO math), :mod:`~.privdpo` (label-DP mechanisms and
their accounting), :mod:`~.config` (one dataclass per trainer), :mod:`~.data` (loading and
tokenising), :mod:`~.forward` (model to log-probs), :mod:`~.preference` and :mod:`~.sft` (the
trainers), :mod:`~.evaluate` (held-out metrics, membership attack), :mod:`~.api` (``train``),
and for win rates :mod:`~.generation` (one answer per prompt), :mod:`~.judge` (a local pairwise
judge read from label probabilities), :mod:`~.pairwise_stats` (win rates and their intervals)
and :mod:`~.winrate` (the runner).

>>> from dpprefsyn.train import train  # doctest: +SKIP
>>> train("privdpo", "pairs.jsonl", "sft-model", "dpo-model", epsilon=1.0)  # doctest: +SKIP
PosixPath('dpo-model')

Only :func:`train` is imported here, so ``import dpprefsyn.train`` stays light; the trainers
import ``transformers`` when their modules are.
"""

from dpprefsyn.train.api import KINDS, train

__all__ = ["KINDS", "train"]
