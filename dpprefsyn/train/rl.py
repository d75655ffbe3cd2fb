"""On-policy RL of a causal LM against a reward function, with a KL penalty to its initial self.

TRL 1.16 removed its PPO trainer, so this is a compact one: RLOO (REINFORCE with a
leave-one-out baseline; Ahmadian et al., 2024), optionally with PPO's clipped surrogate and
several optimisation epochs per batch of samples. Each step samples ``k_samples`` responses to
each of ``batch_prompts`` prompts, scores them, subtracts ``kl_coef`` times a per-token estimate
of KL(pi || pi_ref) summed over the response, and takes one or more gradient steps.

There is no value head. The reward is one scalar per sequence, and the other k - 1 samples of
the same prompt give an unbiased baseline for it without a second network to train, tune and
keep in memory; per-token credit assignment (GAE) buys little when the signal only arrives at
the end. That is why PPO here is "RLOO advantages + clipped ratio", not actor-critic PPO.

The math (:func:`rloo_advantages`, :func:`sequence_kl`, :func:`policy_gradient_loss`,
:func:`response_mask`) is pure torch; :func:`train_rl` does the sampling, logging and saving.
The module runs past 400 lines mostly in the config's help texts and the docstrings; the code
itself is two small halves that are only ever read together.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from dpprefsyn.train.modeling import eos_token_ids

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "LOSSES",
    "LOG_FILE",
    "RLConfig",
    "policy_gradient_loss",
    "response_logps",
    "response_mask",
    "rloo_advantages",
    "sequence_kl",
    "train_rl",
]

logger = logging.getLogger(__name__)

LOSSES = ("rloo", "ppo-clip")
LOG_FILE = "rl_log.jsonl"
CONFIG_FILE = "rl_config.json"

RewardFn = Callable[[list[str], list[str]], "torch.Tensor | np.ndarray | Sequence[float]"]


@dataclass
class RLConfig:
    """Configuration of :func:`train_rl`.

    Parameters
    ----------
    learning_rate : float, default=1e-6
    steps : int, default=100
    max_grad_norm : float or None, default=1.0
    batch_prompts : int, default=4
    k_samples : int, default=4
    max_new_tokens : int, default=32
    temperature : float, default=1.0
    max_prompt_length : int, default=512
    chat_template : bool, default=True
    loss : {"rloo", "ppo-clip"}, default="rloo"
    kl_coef : float, default=0.05
    ppo_epochs : int, default=1
    cliprange : float, default=0.2
    seed : int, default=0
    output_dir : str, default="rl-output"
    device : str or None, default=None
        None means ``"cuda"`` when available, else ``"cpu"``.
    bf16 : bool or None, default=None
        None becomes True when the run is on CUDA.
    """

    # Optimisation
    learning_rate: float = field(default=1e-6, metadata={"help": "AdamW learning rate."})
    steps: int = field(default=100, metadata={"help": "Sampling rounds (one batch of prompts)."})
    max_grad_norm: float | None = field(
        default=1.0, metadata={"help": "Clip the gradient norm to this; None does not clip."}
    )

    # Sampling
    batch_prompts: int = field(default=4, metadata={"help": "Prompts per step."})
    k_samples: int = field(
        default=4, metadata={"help": "Responses per prompt; at least 2 for the RLOO baseline."}
    )
    max_new_tokens: int = field(default=32, metadata={"help": "Longest response in tokens."})
    temperature: float = field(
        default=1.0,
        metadata={"help": "Sampling temperature; the policy trained is the tempered one."},
    )
    max_prompt_length: int = field(
        default=512, metadata={"help": "Longest prompt in tokens; longer ones lose their start."}
    )
    chat_template: bool = field(
        default=True,
        metadata={"help": "Write prompts as a user turn when the tokenizer has a chat template."},
    )

    # Objective
    loss: str = field(
        default="rloo",
        metadata={
            "help": "rloo (REINFORCE, leave-one-out baseline) or ppo-clip.",
            "choices": LOSSES,
        },
    )
    kl_coef: float = field(
        default=0.05, metadata={"help": "Weight of KL(pi || pi_ref) subtracted from the reward."}
    )
    ppo_epochs: int = field(
        default=1, metadata={"help": "ppo-clip: gradient steps per batch of samples."}
    )
    cliprange: float = field(
        default=0.2, metadata={"help": "ppo-clip: ratios outside 1 +- cliprange get no gradient."}
    )

    # Run
    seed: int = field(default=0, metadata={"help": "Seed of prompt order and sampling."})
    output_dir: str = field(
        default="rl-output", metadata={"help": "Where the model and the step log go."}
    )
    device: str | None = field(
        default=None, metadata={"help": "Torch device; None: cuda when available, else cpu."}
    )
    bf16: bool | None = field(
        default=None,
        metadata={"help": "bfloat16 autocast; None: True when the run is on CUDA."},
    )

    def __post_init__(self) -> None:
        """Reject bad values before any model loads, and resolve ``bf16``."""
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if self.k_samples < 2:
            raise ValueError(f"k_samples must be at least 2 for a baseline, got {self.k_samples}")
        for name in ("steps", "batch_prompts", "max_new_tokens", "max_prompt_length", "ppo_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)}")
        if not (self.learning_rate > 0 and self.temperature > 0 and self.cliprange > 0):
            raise ValueError("learning_rate, temperature and cliprange must be positive")
        if self.kl_coef < 0:
            raise ValueError(f"kl_coef must be non-negative, got {self.kl_coef}")
        if self.loss == "rloo" and self.ppo_epochs != 1:
            raise ValueError(
                "loss='rloo' is on-policy: a second epoch on the same samples needs the "
                "importance ratio, so use loss='ppo-clip' for ppo_epochs > 1"
            )
        if self.bf16 is None:
            self.bf16 = _resolve_device(self.device).type == "cuda"


# --- math ------------------------------------------------------------------------------


def rloo_advantages(rewards: torch.Tensor, k: int) -> torch.Tensor:
    """Each sample's reward minus the mean reward of the other ``k - 1`` samples of its prompt.

    The baseline leaves the sample out, so it does not depend on the sample's own action and
    the policy gradient stays unbiased; the advantages of a prompt sum to zero.

    Parameters
    ----------
    rewards : Tensor of shape (n_prompts * k,)
        Grouped by prompt: samples ``i * k`` to ``i * k + k - 1`` answer prompt ``i``.
    k : int
        Samples per prompt, at least 2.

    Returns
    -------
    Tensor of shape (n_prompts * k,)
    """
    if k < 2 or rewards.numel() % k:
        raise ValueError(f"need k >= 2 dividing the number of rewards, got k={k}")
    grouped = rewards.view(-1, k)
    baseline = (grouped.sum(dim=1, keepdim=True) - grouped) / (k - 1)
    return (grouped - baseline).reshape(-1)


def sequence_kl(logps: torch.Tensor, ref_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Estimate of KL(pi || pi_ref) per sequence: ``sum_t log pi(y_t) - log pi_ref(y_t)``.

    With ``y`` sampled from ``pi`` this (the "k1" estimator) is unbiased for the KL of the whole
    response, and it is exactly 0 where the policy equals the reference.

    Parameters
    ----------
    logps, ref_logps : Tensor of shape (batch, n_response)
        Per-token log-probs of the sampled tokens under the policy and the reference.
    mask : Tensor of shape (batch, n_response)
        1 on response tokens, 0 after the end of the response.

    Returns
    -------
    Tensor of shape (batch,)
    """
    return ((logps - ref_logps) * mask).sum(dim=-1)


def policy_gradient_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    cliprange: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Policy-gradient loss of a batch of sampled responses, and the share of clipped tokens.

    Both objectives sum over a response's tokens and average over responses, so that with
    ``logps == old_logps`` (ratio 1, the first PPO epoch) their gradients are identical:
    ``-mean_i A_i * sum_t grad log pi(y_it)``.

    Parameters
    ----------
    logps : Tensor of shape (batch, n_response)
        Per-token log-probs under the policy being trained (with gradient).
    old_logps : Tensor of shape (batch, n_response)
        The same under the policy that sampled the responses (no gradient).
    advantages : Tensor of shape (batch,)
    mask : Tensor of shape (batch, n_response)
    cliprange : float or None, default=None
        None gives REINFORCE (RLOO); a number gives PPO's clipped surrogate
        ``min(r A, clip(r, 1 - c, 1 + c) A)`` with ``r = pi / pi_old`` per token.

    Returns
    -------
    loss : Tensor, scalar
    clip_fraction : Tensor, scalar
        Share of response tokens whose ratio was clipped; 0 for REINFORCE.
    """
    mask = mask.to(logps.dtype)
    adv = advantages.detach()[:, None]
    if cliprange is None:
        return -(adv * logps * mask).sum(dim=-1).mean(), torch.zeros((), device=logps.device)
    ratio = torch.exp(logps - old_logps.detach())
    clipped = ratio.clamp(1 - cliprange, 1 + cliprange)
    surrogate = torch.minimum(ratio * adv, clipped * adv)
    clip_fraction = (((ratio - clipped).abs() > 0).to(mask.dtype) * mask).sum() / mask.sum()
    return -(surrogate * mask).sum(dim=-1).mean(), clip_fraction.detach()


def response_mask(tokens: torch.Tensor, eos_token_ids: Sequence[int]) -> torch.Tensor:
    """1 on each generated token up to and including the first end-of-sequence token, else 0.

    Works when padding reuses the EOS id, since only what follows the first EOS is dropped.

    Parameters
    ----------
    tokens : Tensor of shape (batch, n_response)
        Generated tokens, without the prompt.
    eos_token_ids : sequence of int

    Returns
    -------
    LongTensor of shape (batch, n_response)
    """
    is_eos = torch.isin(tokens, torch.as_tensor(list(eos_token_ids), device=tokens.device))
    after_eos = (is_eos.long().cumsum(dim=1) - is_eos.long()) > 0
    return (~after_eos).long()


def response_logps(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    n_response: int,
    *,
    temperature: float = 1.0,
) -> torch.Tensor:
    """Log-probs of the last ``n_response`` tokens of each sequence, shape ``(batch, n_response)``.

    Logits are divided by the sampling temperature, so they are the log-probs of the
    distribution the tokens were drawn from. Position ids follow the attention mask, as in
    ``generate``, so left padding does not shift positions.
    """
    position_ids = attention_mask.long().cumsum(dim=-1) - 1
    position_ids.masked_fill_(attention_mask == 0, 1)
    logits = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        logits_to_keep=n_response + 1,
        use_cache=False,
    ).logits[:, :-1]
    logits = logits.float() / temperature
    targets = input_ids[:, -n_response:]
    return -F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")


# --- training --------------------------------------------------------------------------


def train_rl(
    policy_name_or_path: str | Path,
    prompts: Sequence[str],
    reward_fn: RewardFn,
    config: RLConfig | None = None,
) -> Path:
    """Fine-tune a causal LM with RLOO or PPO-clip to raise ``reward_fn``, and save it.

    Parameters
    ----------
    policy_name_or_path : str or Path
        Causal LM and tokenizer, as ``from_pretrained`` takes them. A frozen copy is the KL
        reference.
    prompts : sequence of str
        Raw prompts; drawn in a seeded random order, a pass at a time.
    reward_fn : callable
        ``reward_fn(prompts, responses)`` returns one reward per pair, e.g. a
        :class:`~dpprefsyn.train.reward.PrivateRewardFunction`. It receives the raw prompts
        (not chat-formatted) and the decoded responses, special tokens removed.
    config : RLConfig or None, default=None
        None uses the defaults.

    Returns
    -------
    Path
        ``config.output_dir``, holding the model, its tokenizer, ``rl_config.json`` and
        ``rl_log.jsonl`` (one line per step: mean reward, KL, loss, timings; no text).

    Notes
    -----
    **Privacy.** RL spends no budget of its own: a reward computed from a DP release is
    post-processing, and the prompts should be public. The log holds aggregates only.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dpprefsyn.train.modeling import disable_dropout

    cfg = config or RLConfig()
    if not prompts:
        raise ValueError("prompts is empty")
    device = _resolve_device(cfg.device)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    saved_tokenizer = AutoTokenizer.from_pretrained(policy_name_or_path)
    # A working copy: padding settings persist in a fast tokenizer's saved state.
    tokenizer = copy.deepcopy(saved_tokenizer)
    tokenizer.padding_side = tokenizer.truncation_side = "left"  # generation continues the right
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    policy = AutoModelForCausalLM.from_pretrained(policy_name_or_path).to(device)
    reference = AutoModelForCausalLM.from_pretrained(policy_name_or_path).to(device)
    reference.eval().requires_grad_(False)
    for model in (policy, reference):
        disable_dropout(model)  # so the training forward scores exactly what was sampled
    (out / CONFIG_FILE).write_text(json.dumps(asdict(cfg), indent=2))

    saved_generation_config = policy.generation_config
    eos_ids = eos_token_ids(saved_generation_config, tokenizer)
    policy.generation_config = _plain_generation_config(saved_generation_config, tokenizer)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.learning_rate)
    forks = [device] if device.type == "cuda" else []
    order = _prompt_order(len(prompts), cfg.batch_prompts * cfg.steps, cfg.seed)
    with torch.random.fork_rng(devices=forks), (out / LOG_FILE).open("w") as log:
        torch.manual_seed(cfg.seed)
        for step in range(cfg.steps):
            batch = [prompts[i] for i in order[step * cfg.batch_prompts :][: cfg.batch_prompts]]
            record = _rl_step(
                policy, reference, tokenizer, optimizer, batch, reward_fn, cfg, eos_ids
            )
            record = {"step": step, **record}
            log.write(json.dumps(record) + "\n")
            log.flush()
            logger.info("rl step %d: reward %.4f kl %.4f", step, record["reward"], record["kl"])
    policy.generation_config = saved_generation_config
    policy.save_pretrained(out)
    saved_tokenizer.save_pretrained(out)
    return out


def _rl_step(
    policy: torch.nn.Module,
    reference: torch.nn.Module,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    prompts: list[str],
    reward_fn: RewardFn,
    cfg: RLConfig,
    eos_ids: list[int],
) -> dict[str, float]:
    """Sample, score and update once; returns the step's aggregates for the log."""
    device = next(policy.parameters()).device
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bool(cfg.bf16))
    k = cfg.k_samples
    t0 = time.perf_counter()
    enc = _encode_prompts(tokenizer, prompts, cfg).to(device)
    with torch.no_grad(), autocast:
        sequences = policy.generate(
            input_ids=enc["input_ids"].repeat_interleave(k, dim=0),
            attention_mask=enc["attention_mask"].repeat_interleave(k, dim=0),
            do_sample=True,
            temperature=cfg.temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=cfg.max_new_tokens,
        )
    n_prompt = enc["input_ids"].shape[1]
    tokens = sequences[:, n_prompt:]
    mask = response_mask(tokens, eos_ids)
    attention = torch.cat([enc["attention_mask"].repeat_interleave(k, dim=0), mask], dim=1)
    t1 = time.perf_counter()

    lengths = mask.sum(dim=1).tolist()
    responses = [
        tokenizer.decode(row[:n], skip_special_tokens=True)
        for row, n in zip(tokens.tolist(), lengths, strict=True)
    ]
    rewards = torch.as_tensor(
        reward_fn([p for p in prompts for _ in range(k)], responses), dtype=torch.float32
    ).reshape(-1)
    if rewards.numel() != len(responses):
        raise ValueError(f"reward_fn returned {rewards.numel()} rewards for {len(responses)}")
    rewards = rewards.to(device)
    t2 = time.perf_counter()

    n = tokens.shape[1]
    with torch.no_grad(), autocast:
        ref_logps = response_logps(reference, sequences, attention, n, temperature=cfg.temperature)
    cliprange = cfg.cliprange if cfg.loss == "ppo-clip" else None
    for epoch in range(cfg.ppo_epochs):
        with autocast:
            logps = response_logps(policy, sequences, attention, n, temperature=cfg.temperature)
        if epoch == 0:  # the sampling policy: its log-probs give the KL and the PPO ratio's base
            old_logps = logps.detach()
            kl = sequence_kl(old_logps, ref_logps, mask)
            shaped = rewards - cfg.kl_coef * kl
            advantages = rloo_advantages(shaped, k)
        loss, clip_fraction = policy_gradient_loss(
            logps, old_logps, advantages, mask, cliprange=cliprange
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
        optimizer.step()
    t3 = time.perf_counter()
    record = {
        "reward": rewards.mean().item(),
        "reward_std": rewards.std().item(),
        "kl": kl.mean().item(),
        "shaped_reward": shaped.mean().item(),
        "loss": loss.item(),
        "response_tokens": float(sum(lengths) / len(lengths)),
        "time_generate_s": t1 - t0,
        "time_reward_s": t2 - t1,
        "time_update_s": t3 - t2,
    }
    if cliprange is not None:
        record["clip_fraction"] = clip_fraction.item()
    return record


def _resolve_device(device: str | None) -> torch.device:
    """Return the requested device, or CUDA when available, else the CPU."""
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _prompt_order(n_prompts: int, n_draws: int, seed: int) -> list[int]:
    """Prompt indices for the whole run: seeded shuffled passes, so each prompt recurs evenly."""
    generator = torch.Generator().manual_seed(seed)
    passes = -(-n_draws // n_prompts)
    return torch.cat([torch.randperm(n_prompts, generator=generator) for _ in range(passes)])[
        :n_draws
    ].tolist()


def _encode_prompts(tokenizer: Any, prompts: list[str], cfg: RLConfig) -> Any:
    """Left-padded, left-truncated prompt ids, as user turns when the tokenizer has a template."""
    if cfg.chat_template and tokenizer.chat_template:
        texts = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
            )
            for p in prompts
        ]
        special = False  # the template already writes any BOS
    else:
        texts, special = prompts, True
    return tokenizer(
        texts,
        return_tensors="pt",
        padding=True,
        truncation=True,
        max_length=cfg.max_prompt_length,
        add_special_tokens=special,
    )


def _plain_generation_config(generation_config: Any, tokenizer: Any) -> Any:
    """Build a generation config holding only the special ids, for sampling during RL.

    A checkpoint's own config may carry top-k/top-p, repetition penalties or banned tokens;
    ``generate`` would apply them to any setting left unset, and the samples would then not
    come from the policy whose log-probs the loss uses.
    """
    from transformers import GenerationConfig

    return GenerationConfig(
        eos_token_id=eos_token_ids(generation_config, tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=generation_config.bos_token_id,
    )
