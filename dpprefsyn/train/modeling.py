"""Model preparation shared by the trainers: dropout off, LoRA on."""

from __future__ import annotations

import torch


def disable_dropout(model: torch.nn.Module) -> None:
    """Set every dropout probability to 0, as TRL does for DPO.

    With dropout on, the policy's log-probs of a pair would be noisy and would not match the
    reference's at step 0, so ``psi`` would not start at 1/2.
    """
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def apply_lora(model: torch.nn.Module, *, r: int, alpha: int) -> torch.nn.Module:
    """Wrap ``model`` in a fresh LoRA adapter on all its linear layers (``peft``).

    The adapter starts at zero, so the wrapped model equals the initial one: the reference
    is the same model with the adapter disabled.
    """
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("use_lora needs peft: pip install 'dpprefsyn[train]'") from err
    config = LoraConfig(r=r, lora_alpha=alpha, target_modules="all-linear", task_type="CAUSAL_LM")
    return get_peft_model(model, config)
