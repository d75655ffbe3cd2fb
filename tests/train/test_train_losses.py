"""DPO math: our loss against the formula, and against TRL's DPOTrainer on one batch."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from dpprefsyn.train.data import PreferenceCollator
from dpprefsyn.train.forward import pair_logps
from dpprefsyn.train.losses import dpo_loss, preference_intensity, sequence_logps


def perturb(model: torch.nn.Module, scale: float = 0.5, seed: int = 1) -> torch.nn.Module:
    """The model with noise on every weight, so that it differs from its reference."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return model


def test_sequence_logps_sums_response_tokens_only():
    logits = torch.randn(2, 5, 7, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[1, 2, 3, 4, 0], [5, 6, 1, 2, 3]])
    mask = torch.tensor([[0, 0, 1, 1, 0], [0, 1, 1, 1, 1]])
    logp = torch.log_softmax(logits, -1)
    expected = [logp[0, 1, 3] + logp[0, 2, 4], sum(logp[1, t - 1, ids[1, t]] for t in range(1, 5))]
    torch.testing.assert_close(sequence_logps(logits, ids, mask), torch.stack(expected))


def test_dpo_loss_and_intensity_formulas():
    pc, pr, rc, rr = torch.tensor([-3.0, -1.0]), torch.tensor([-2.0, -4.0]), -2.5, -2.5
    h = (pc - rc) - (pr - rr)
    torch.testing.assert_close(dpo_loss(pc, pr, rc, rr, 0.1), -torch.log(torch.sigmoid(0.1 * h)))
    psi = preference_intensity(pc, pr, rc, rr, 0.1)
    torch.testing.assert_close(psi, torch.sigmoid(-0.1 * h))
    assert not psi.requires_grad
    # At the reference the loss is log 2 and psi is 1/2.
    assert dpo_loss(pc, pc, pc, pc, 0.1)[0].item() == pytest.approx(math.log(2))


def test_dpo_loss_matches_trl_dpo_trainer(tiny_model, tokenizer, pairs, tmp_path):
    """Same model, same batch: our DPO loss equals TRL 1.16's sigmoid loss within 1e-5."""
    trl = pytest.importorskip("trl")
    ref = copy.deepcopy(tiny_model)
    policy = perturb(tiny_model)
    batch_rows = [pairs[i] for i in range(4)]

    args = trl.DPOConfig(
        output_dir=str(tmp_path),
        report_to=[],
        use_cpu=True,
        bf16=False,
        beta=0.1,
        loss_type=["sigmoid"],
        max_length=64,
        per_device_train_batch_size=4,
        disable_tqdm=True,
    )
    trainer = trl.DPOTrainer(
        model=copy.deepcopy(policy),
        ref_model=copy.deepcopy(ref),
        args=args,
        train_dataset=pairs.select(range(4)),
        processing_class=tokenizer,
    )
    trl_batch = trainer.data_collator([trainer.train_dataset[i] for i in range(4)])
    with torch.no_grad():
        trl_loss = trainer.compute_loss(trainer.model, trl_batch).item()

    ours = PreferenceCollator(tokenizer, max_length=64, max_prompt_length=None)(batch_rows)
    # Same tokens, same masks: TRL's tokenisation is ours.
    assert torch.equal(ours["input_ids"], trl_batch["input_ids"])
    assert torch.equal(ours["completion_mask"], trl_batch["completion_mask"])
    with torch.no_grad():
        pol, rf = pair_logps(policy, ours), pair_logps(ref, ours)
    our_loss = dpo_loss(pol[0], pol[1], rf[0], rf[1], 0.1).mean().item()
    assert abs(trl_loss - math.log(2)) > 1e-3  # the test would be vacuous at the reference
    assert our_loss == pytest.approx(trl_loss, abs=1e-5)
