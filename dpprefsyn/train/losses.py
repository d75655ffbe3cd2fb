"""DPO math on per-sequence log-probabilities: pure torch, no model, no randomness.

Everything downstream (the trainer, the private mechanisms, the evaluation metrics) is written
in terms of the DPO logit ``h = (log pi - log pi_ref)(y_w) - (log pi - log pi_ref)(y_l)``, so the
few formulas here are the single place where the sign conventions live.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def sequence_logps(
    logits: torch.Tensor, input_ids: torch.Tensor, completion_mask: torch.Tensor
) -> torch.Tensor:
    """Log-probability of each sequence's completion given its prompt.

    Parameters
    ----------
    logits : Tensor of shape (batch, seq_len, vocab)
        Causal LM logits for ``input_ids``.
    input_ids : Tensor of shape (batch, seq_len)
        Prompt followed by response, right-padded.
    completion_mask : Tensor of shape (batch, seq_len)
        1 on response tokens, 0 on prompt and padding: the prompt is conditioned on, not scored.

    Returns
    -------
    Tensor of shape (batch,)
        ``sum_t log p(x_t | x_<t)`` over response tokens, in float32 or wider so that long
        responses do not lose precision in a bf16 sum.
    """
    logits = logits[:, :-1]
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    token_logps = -F.cross_entropy(logits.transpose(1, 2), input_ids[:, 1:], reduction="none")
    return (token_logps * completion_mask[:, 1:].to(token_logps.dtype)).sum(dim=-1)


def dpo_logits(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
) -> torch.Tensor:
    """DPO logit ``h = (pc - rc) - (pr - rr)``: the chosen response's log-ratio lead.

    ``beta * h`` is the implicit reward margin of the pair.
    """
    return (policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps)


def dpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """Per-example sigmoid DPO loss ``-log sigmoid(beta * h)`` (Rafailov et al., 2023).

    Returns
    -------
    Tensor of shape (batch,)
        Not reduced, so that private mechanisms can weight each example before the mean.
    """
    h = dpo_logits(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)
    return -F.logsigmoid(beta * h)


def preference_intensity(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """Preference intensity ``psi = sigmoid(beta * h_l - beta * h_w) = sigmoid(-beta * h)``.

    It is the size of the DPO gradient: ``grad L = -psi * beta * grad h``. It is returned with
    the gradient stopped, because the private mechanisms treat it as a constant weight.

    Returns
    -------
    Tensor of shape (batch,)
        Values in (0, 1); 1/2 where the policy equals the reference.
    """
    h = dpo_logits(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)
    return torch.sigmoid(-beta * h).detach()
