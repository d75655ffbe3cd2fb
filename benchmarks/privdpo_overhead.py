"""Per-step cost of PrivDPO against plain DPO on the same model and batch.

Usage::

    python benchmarks/privdpo_overhead.py [--layers 4] [--dim 128] [--steps 60] [--json PATH]

Both losses run the trainer's own step (``pair_logps`` -> ``dpo_logits`` -> ``private_dpo_loss``
-> backward -> AdamW step) on one GPT-2 built from a config, with precomputed reference
log-probs, as :class:`~dpprefsyn.train.preference.PreferenceTrainer` does. PrivDPO adds one
uniform draw and a few scalar operations per pair, so its overhead is largest, relatively, on a
small model: a 4-layer, 128-dim model is close to the worst case. Blocks of steps alternate
between the two losses so that machine load drifts affect both alike; the ratio is of median
step times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from dpprefsyn.train.forward import pair_logps
from dpprefsyn.train.losses import dpo_logits
from dpprefsyn.train.privdpo import private_dpo_loss


def make_batch(pairs: int, prompt: int, response: int, vocab: int, seed: int) -> dict:
    """A collator-shaped batch of random tokens: ``pairs`` chosen rows, then as many rejected."""
    gen = torch.Generator().manual_seed(seed)
    length = prompt + response
    ids = torch.randint(vocab, (2 * pairs, length), generator=gen)
    completion = torch.zeros_like(ids)
    completion[:, prompt:] = 1
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "completion_mask": completion}


def step_times(model, batch, ref, loss: str, steps: int, generator) -> list[float]:
    """Wall seconds of ``steps`` optimiser steps of ``loss``."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        logps = pair_logps(model, batch)
        h = dpo_logits(logps[0], logps[1], ref[0], ref[1])
        out = private_dpo_loss(h, beta=0.1, loss=loss, epsilon=1.0, generator=generator)
        out.loss.mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    return times


def loss_only_time(ref: torch.Tensor, loss: str, generator, reps: int = 2000) -> float:
    """Mean seconds of the loss alone, forward and backward, on the batch's DPO logits.

    This isolates what PrivDPO adds (coins, offsets) from the model, whose step time is noisy
    on a shared machine: the difference to ``dpo`` bounds the mechanism's cost.
    """
    h = (ref[0] - ref[1]).clone().requires_grad_(True)
    start = time.perf_counter()
    for _ in range(reps):
        out = private_dpo_loss(h, beta=0.1, loss=loss, epsilon=1.0, generator=generator)
        out.loss.mean().backward()
    return (time.perf_counter() - start) / reps


def main() -> None:
    """Time both losses and print (and optionally save) the per-step medians and their ratio."""
    from transformers import GPT2Config, GPT2LMHeadModel

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--pairs", type=int, default=8, help="pairs per batch")
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens")
    ap.add_argument("--response", type=int, default=32, help="response tokens")
    ap.add_argument("--steps", type=int, default=60, help="steps per loss, in blocks")
    ap.add_argument("--block", type=int, default=10, help="steps per alternating block")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=a.vocab,
        n_positions=a.prompt + a.response,
        n_embd=a.dim,
        n_layer=a.layers,
        n_head=4,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = GPT2LMHeadModel(config).train()
    batch = make_batch(a.pairs, a.prompt, a.response, a.vocab, seed=1)
    with torch.no_grad():
        ref = pair_logps(model, batch)
    generator = torch.Generator().manual_seed(2)

    step_times(model, batch, ref, "dpo", 3, generator)  # warm-up: allocator, kernels
    times: dict[str, list[float]] = {"dpo": [], "privdpo": []}
    for _ in range(a.steps // a.block):
        for loss in ("dpo", "privdpo"):
            times[loss] += step_times(model, batch, ref, loss, a.block, generator)
    median = {k: statistics.median(v) for k, v in times.items()}
    mechanism = {k: loss_only_time(ref, k, generator) for k in ("dpo", "privdpo")}
    result = {
        "model": {"layers": a.layers, "dim": a.dim, "vocab": a.vocab},
        "batch": {"pairs": a.pairs, "tokens_per_sequence": a.prompt + a.response},
        "steps_per_loss": len(times["dpo"]),
        "threads": a.threads,
        "dpo_ms_per_step": 1e3 * median["dpo"],
        "privdpo_ms_per_step": 1e3 * median["privdpo"],
        "ratio": median["privdpo"] / median["dpo"],
        "loss_only_us": {k: 1e6 * v for k, v in mechanism.items()},
        "mechanism_share_of_dpo_step": (mechanism["privdpo"] - mechanism["dpo"]) / median["dpo"],
    }
    print(
        f"DPO {result['dpo_ms_per_step']:.1f} ms/step, PrivDPO "
        f"{result['privdpo_ms_per_step']:.1f} ms/step, ratio {result['ratio']:.3f} "
        f"({result['steps_per_loss']} steps each, {a.layers}x{a.dim} GPT-2, {a.pairs} pairs); "
        f"loss alone: DPO {result['loss_only_us']['dpo']:.0f} us, PrivDPO "
        f"{result['loss_only_us']['privdpo']:.0f} us = "
        f"{100 * result['mechanism_share_of_dpo_step']:.2f}% of a DPO step"
    )
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
