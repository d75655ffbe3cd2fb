"""Held-out metrics of a preference-trained policy, and the memorisation attack on it.

The metrics are those of the PrivDPO evaluation: the implicit reward margin
``beta * (log pi/pi_ref (y_w) - log pi/pi_ref (y_l))``, reward accuracy (margin > 0) and the DPO
loss, all against the reference (prior) model. The attack asks whether that margin is larger on
the training pairs than on unseen ones: its AUC is 0.5 when training memorised nothing that the
margin reveals.

Scoring the training pairs reads their labels: run the attack for auditing, not on a model
whose label privacy must hold for others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from dpprefsyn.train.data import PreferenceCollator, load_preference_dataset
from dpprefsyn.train.forward import dataset_pair_logps
from dpprefsyn.train.losses import dpo_logits

if TYPE_CHECKING:
    from pathlib import Path

    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def reward_margins(
    policy: PreTrainedModel,
    reference: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    pairs: Dataset | str | Path,
    *,
    beta: float,
    batch_size: int = 8,
    max_length: int | None = 1024,
    max_prompt_length: int | None = 512,
) -> torch.Tensor:
    """Implicit reward margin ``beta * h`` of every pair, in order, as a float32 CPU tensor."""
    pairs = load_preference_dataset(pairs)
    collator = PreferenceCollator(
        tokenizer, max_length=max_length, max_prompt_length=max_prompt_length
    )
    pol = dataset_pair_logps(policy, pairs, collator, batch_size=batch_size)
    ref = dataset_pair_logps(reference, pairs, collator, batch_size=batch_size)
    return beta * dpo_logits(pol[0], pol[1], ref[0], ref[1])


def preference_metrics(
    policy: PreTrainedModel,
    reference: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    pairs: Dataset | str | Path,
    *,
    beta: float,
    **kwargs: int | None,
) -> dict[str, float]:
    """Reward margin, reward accuracy and DPO loss of ``policy`` on held-out ``pairs``.

    Parameters
    ----------
    policy, reference : PreTrainedModel
        The trained model and the model it started from.
    tokenizer : PreTrainedTokenizerBase
    pairs : datasets.Dataset, str or Path
        Held-out preference pairs.
    beta : float
        The ``beta`` the policy was trained with: it scales the implicit reward.
    **kwargs
        ``batch_size``, ``max_length``, ``max_prompt_length`` of :func:`reward_margins`.

    Returns
    -------
    dict
        ``reward_margin`` (mean), ``reward_accuracy`` (share with margin > 0), ``dpo_loss``
        (mean) and ``n_pairs``.
    """
    margins = reward_margins(policy, reference, tokenizer, pairs, beta=beta, **kwargs)
    return {
        "reward_margin": margins.mean().item(),
        # A zero margin (e.g. the reference scored against itself) is a tie: one half.
        "reward_accuracy": ((margins > 0).float() + 0.5 * (margins == 0).float()).mean().item(),
        "dpo_loss": F.softplus(-margins).mean().item(),
        "n_pairs": int(margins.numel()),
    }


def membership_inference(
    policy: PreTrainedModel,
    reference: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    members: Dataset | str | Path,
    non_members: Dataset | str | Path,
    *,
    beta: float,
    **kwargs: int | None,
) -> dict[str, float]:
    """Memorisation-advantage attack: tell training pairs from unseen ones by reward margin.

    The score of a pair is its implicit reward margin relative to the reference (prior) model;
    a policy that memorised its training labels gives its training pairs larger margins.

    Parameters
    ----------
    policy, reference : PreTrainedModel
    tokenizer : PreTrainedTokenizerBase
    members : datasets.Dataset, str or Path
        Pairs the policy was trained on.
    non_members : datasets.Dataset, str or Path
        Pairs from the same distribution it never saw.
    beta : float
    **kwargs
        ``batch_size``, ``max_length``, ``max_prompt_length`` of :func:`reward_margins`.

    Returns
    -------
    dict
        ``auc`` (ROC AUC of the score, 0.5 = no signal), ``advantage`` (max TPR - FPR over
        thresholds), ``n_members``, ``n_non_members``.
    """
    from sklearn.metrics import roc_auc_score, roc_curve

    scores_in = reward_margins(policy, reference, tokenizer, members, beta=beta, **kwargs)
    scores_out = reward_margins(policy, reference, tokenizer, non_members, beta=beta, **kwargs)
    truth = [1] * scores_in.numel() + [0] * scores_out.numel()
    scores = torch.cat([scores_in, scores_out]).numpy()
    fpr, tpr, _ = roc_curve(truth, scores)
    return {
        "auc": float(roc_auc_score(truth, scores)),
        "advantage": float((tpr - fpr).max()),
        "n_members": int(scores_in.numel()),
        "n_non_members": int(scores_out.numel()),
    }
