"""Model forward passes to per-sequence log-probabilities, shared by training and evaluation."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from dpprefsyn.train.losses import sequence_logps

if TYPE_CHECKING:
    from collections.abc import Callable

    from datasets import Dataset


def pair_logps(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Completion log-probs of a :class:`~dpprefsyn.train.data.PreferenceCollator` batch.

    Returns
    -------
    Tensor of shape (2, B)
        Row 0 the chosen responses, row 1 the rejected ones.
    """
    logits = model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False
    ).logits
    logps = sequence_logps(logits, batch["input_ids"], batch["completion_mask"])
    return logps.view(2, -1)


@torch.no_grad()
def dataset_pair_logps(
    model: torch.nn.Module,
    dataset: Dataset,
    collator: Callable[[list[dict]], dict[str, torch.Tensor]],
    *,
    batch_size: int = 8,
) -> torch.Tensor:
    """Completion log-probs of every pair of ``dataset``, in order, in eval mode.

    Returns
    -------
    Tensor of shape (2, len(dataset))
        Chosen, then rejected, on the CPU in float32.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = []
    try:
        for start in range(0, len(dataset), batch_size):
            examples = [dataset[i] for i in range(start, min(start + batch_size, len(dataset)))]
            batch = {k: v.to(device) for k, v in collator(examples).items()}
            out.append(pair_logps(model, batch).float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(out, dim=1)
