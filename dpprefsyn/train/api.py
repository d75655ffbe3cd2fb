"""One call to fine-tune a model on preference data: ``train(kind, data, model, out_dir)``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

KINDS = ("sft", "privsft", "dpo", "privdpo")
PRIVACY_FILE = "privacy.json"


def train(
    kind: str,
    data: str | Path | Dataset,
    model_name_or_path: str | Path,
    out_dir: str | Path,
    *,
    epsilon: float | None = None,
    config: dict[str, Any] | None = None,
) -> Path:
    """Fine-tune ``model_name_or_path`` on preference pairs and save the result to ``out_dir``.

    Parameters
    ----------
    kind : {"sft", "privsft", "dpo", "privdpo"}
        ``sft`` trains on the chosen responses; ``privsft`` on both responses (label-epsilon
        0); ``dpo`` is plain DPO; ``privdpo`` is label-private DPO, PrivDPO by default or one
        of its baselines with ``config={"loss": "rr-dpo" | "duchi" | "piecewise"}``.
    data : str, Path or datasets.Dataset
        Pairs with string columns ``prompt``, ``chosen``, ``rejected``: a ``save_to_disk``
        directory, a JSONL or Parquet file, or a ``Dataset``.
    model_name_or_path : str or Path
        A causal LM and its tokenizer, as ``from_pretrained`` takes them.
    out_dir : str or Path
        Where the trained model (LoRA merged in), its tokenizer and ``privacy.json`` go.
    epsilon : float or None, default=None
        Label epsilon of one pass; required by ``privdpo``, refused by the other kinds.
    config : dict or None, default=None
        Other fields of :class:`~dpprefsyn.train.config.PreferenceTrainingConfig` (``dpo``,
        ``privdpo``) or :class:`~dpprefsyn.train.config.SFTTrainingConfig` (``sft``,
        ``privsft``); an unknown field is a ``TypeError``.

    Returns
    -------
    Path
        ``out_dir``.

    Raises
    ------
    ValueError
        Unknown ``kind``, ``epsilon`` where it does not apply or missing where it does, or a
        ``config`` that contradicts ``kind``.

    Notes
    -----
    The label epsilon of the run (``epsilon * num_train_epochs`` for ``privdpo``, 0 for
    ``privsft``, none for the others) is logged and written to ``out_dir/privacy.json``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    fields = dict(config or {})
    for key in ("output_dir", "epsilon", "both_responses"):
        if key in fields:
            raise ValueError(f"config must not set {key!r}: train() sets it from its arguments")
    if kind != "privdpo" and epsilon is not None:
        raise ValueError(f"epsilon applies to kind='privdpo' only, not {kind!r}")

    out_dir = Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_name_or_path)
    model = AutoModelForCausalLM.from_pretrained(model_name_or_path)
    trainer = _build_trainer(kind, fields, model, tokenizer, data, out_dir, epsilon)
    trainer.train()

    trained = trainer.model
    if hasattr(trained, "merge_and_unload"):  # LoRA: ship a plain model
        trained = trained.merge_and_unload()
    trained.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    report = trainer.privacy_report()
    (out_dir / PRIVACY_FILE).write_text(json.dumps(report, indent=2) + "\n")
    logger.info("%s done: label epsilon %s (%s)", kind, report["label_epsilon"], out_dir)
    return out_dir


def _build_trainer(
    kind: str,
    fields: dict[str, Any],
    model: Any,
    tokenizer: Any,
    data: str | Path | Dataset,
    out_dir: Path,
    epsilon: float | None,
) -> Any:
    """Build the trainer of ``kind``, configured from ``fields``."""
    from dpprefsyn.train.config import PreferenceTrainingConfig, SFTTrainingConfig
    from dpprefsyn.train.preference import PreferenceTrainer
    from dpprefsyn.train.privdpo import PRIVATE_LOSSES
    from dpprefsyn.train.sft import SFTTrainer

    if kind in ("sft", "privsft"):
        args = SFTTrainingConfig(
            output_dir=str(out_dir), both_responses=kind == "privsft", **fields
        )
        return SFTTrainer(model, args, train_dataset=data, processing_class=tokenizer)
    loss = fields.pop("loss", kind)
    if kind == "dpo" and loss != "dpo":
        raise ValueError(f"kind='dpo' trains loss='dpo'; {loss!r} is a kind='privdpo' loss")
    if kind == "privdpo" and loss not in PRIVATE_LOSSES:
        raise ValueError(f"kind='privdpo' takes a loss in {PRIVATE_LOSSES}, got {loss!r}")
    args = PreferenceTrainingConfig(output_dir=str(out_dir), loss=loss, epsilon=epsilon, **fields)
    return PreferenceTrainer(model, args, train_dataset=data, processing_class=tokenizer)
