"""Preference data for the trainers: loading, and tokenising prompt + response into batches.

Tokenisation follows TRL's ``DPOTrainer`` for string data, so that our losses and TRL's see the
same tokens: the response gets the EOS token appended, ``prompt`` and ``prompt + response`` are
tokenised separately and the response starts where the two token lists diverge (a tokenizer may
merge tokens across the boundary). Batches are right-padded; the completion mask (or the labels,
for SFT) covers response tokens only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

COLUMNS = ("prompt", "chosen", "rejected")
REF_COLUMNS = ("ref_chosen_logps", "ref_rejected_logps")


def load_preference_dataset(data: str | Path | Dataset) -> Dataset:
    """Load preference pairs with string columns ``prompt``, ``chosen`` and ``rejected``.

    Parameters
    ----------
    data : str, Path or datasets.Dataset
        A ``Dataset``; a directory written by ``save_to_disk`` (a ``DatasetDict`` gives its
        ``train`` split); or a ``.jsonl``/``.json`` or ``.parquet`` file.

    Returns
    -------
    datasets.Dataset
        Only the three columns, in that order.

    Raises
    ------
    ValueError
        A column is missing or not a string column, or the data is empty. The message names
        the column, never a record's content.
    """
    from datasets import Dataset, DatasetDict, load_from_disk

    if not isinstance(data, Dataset):
        path = Path(data)
        if path.is_dir():
            data = load_from_disk(str(path))
            if isinstance(data, DatasetDict):
                if "train" not in data:
                    raise ValueError(f"{path} holds splits {list(data)}, none named 'train'")
                data = data["train"]
        elif path.suffix in (".jsonl", ".json"):
            data = Dataset.from_json(str(path))
        elif path.suffix == ".parquet":
            data = Dataset.from_parquet(str(path))
        else:
            raise ValueError(
                f"{path}: expected a save_to_disk directory, .jsonl/.json or .parquet file"
            )
    for column in COLUMNS:
        if column not in data.column_names:
            raise ValueError(f"preference data has no '{column}' column ({data.column_names})")
        dtype = getattr(data.features[column], "dtype", None)
        if dtype not in ("string", "large_string"):
            raise ValueError(f"column '{column}' must hold strings, found {data.features[column]}")
    if len(data) == 0:
        raise ValueError("preference data is empty")
    return data.select_columns(list(COLUMNS))


def tokenize_response(
    tokenizer: PreTrainedTokenizerBase,
    prompt: str,
    response: str,
    *,
    max_length: int | None,
    max_prompt_length: int | None,
) -> tuple[list[int], list[int]]:
    """Token ids of ``prompt`` and of ``response + EOS`` as they appear after the prompt.

    A prompt longer than ``max_prompt_length`` (or than ``max_length - 1``) keeps its end, the
    part next to the response; prompt + response longer than ``max_length`` then loses the
    response's end.
    """
    eos = tokenizer.eos_token or ""
    if eos and not response.endswith(eos):
        response = response + eos
    prompt_ids = tokenizer(prompt)["input_ids"]
    full_ids = tokenizer(prompt + response)["input_ids"]
    start = 0
    while start < min(len(prompt_ids), len(full_ids)) and prompt_ids[start] == full_ids[start]:
        start += 1
    prompt_ids, response_ids = full_ids[:start], full_ids[start:]
    limits = [n for n in (max_prompt_length, max_length and max_length - 1) if n is not None]
    if limits:
        prompt_ids = prompt_ids[len(prompt_ids) - min(len(prompt_ids), *limits) :]
    if max_length is not None:
        response_ids = response_ids[: max_length - len(prompt_ids)]
    return prompt_ids, response_ids


def _pad(rows: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    """Right-pad ``rows`` to a (len(rows), longest) long tensor."""
    width = max(len(r) for r in rows)
    return torch.tensor([list(r) + [value] * (width - len(r)) for r in rows], dtype=torch.long)


def _pad_token_id(tokenizer: PreTrainedTokenizerBase) -> int:
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        raise ValueError("the tokenizer has neither a pad nor an EOS token to pad with")
    return pad


@dataclass
class PreferenceCollator:
    """Batch pairs as ``2B`` sequences: the ``B`` chosen ones, then the ``B`` rejected ones.

    One forward pass then scores both responses of every pair. Precomputed reference
    log-probs, when present in the examples, pass through as ``ref_chosen_logps`` and
    ``ref_rejected_logps``.
    """

    tokenizer: PreTrainedTokenizerBase
    max_length: int | None = None
    max_prompt_length: int | None = None

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Tokenise and pad ``examples`` into one batch."""
        rows, masks = [], []
        for key in ("chosen", "rejected"):
            for ex in examples:
                p, r = tokenize_response(
                    self.tokenizer,
                    ex["prompt"],
                    ex[key],
                    max_length=self.max_length,
                    max_prompt_length=self.max_prompt_length,
                )
                rows.append(p + r)
                masks.append([0] * len(p) + [1] * len(r))
        batch = {
            "input_ids": _pad(rows, _pad_token_id(self.tokenizer)),
            "attention_mask": _pad([[1] * len(r) for r in rows], 0),
            "completion_mask": _pad(masks, 0),
        }
        for column in REF_COLUMNS:
            if column in examples[0]:
                batch[column] = torch.tensor([ex[column] for ex in examples], dtype=torch.float32)
        return batch


@dataclass
class SFTCollator:
    """Batch prompt + response sequences with labels on the response tokens only.

    With ``both_responses`` each pair gives two sequences, chosen and rejected, so the loss
    treats the two alike; otherwise only ``chosen``. The two are put in text order, not label
    order, so that even the floating-point summation order of the batch ignores the label.
    """

    tokenizer: PreTrainedTokenizerBase
    max_length: int | None = None
    max_prompt_length: int | None = None
    both_responses: bool = False

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Tokenise and pad ``examples`` into one batch."""
        rows, labels = [], []
        for ex in examples:
            responses = (
                sorted((ex["chosen"], ex["rejected"])) if self.both_responses else [ex["chosen"]]
            )
            for response in responses:
                p, r = tokenize_response(
                    self.tokenizer,
                    ex["prompt"],
                    response,
                    max_length=self.max_length,
                    max_prompt_length=self.max_prompt_length,
                )
                rows.append(p + r)
                labels.append([-100] * len(p) + r)
        return {
            "input_ids": _pad(rows, _pad_token_id(self.tokenizer)),
            "attention_mask": _pad([[1] * len(r) for r in rows], 0),
            "labels": _pad(labels, -100),
        }
