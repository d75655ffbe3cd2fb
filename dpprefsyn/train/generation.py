"""One answer per prompt from a causal LM, with vLLM or transformers, for evaluation.

The win-rate runner (:mod:`~dpprefsyn.train.winrate`) answers every public prompt once with the
policy and once with the baseline; its :class:`~dpprefsyn.train.winrate.WinRateConfig` holds the
decoding settings read here. vLLM is imported only when it is used (extra ``gpu``).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpprefsyn.train.winrate import WinRateConfig


def generate_responses(
    model_name_or_path: str | os.PathLike[str],
    prompts: Sequence[str],
    config: WinRateConfig,
    *,
    desc: str = "generate",
) -> list[str]:
    """One answer per prompt from a model, with vLLM or transformers (``config.backend``)."""
    from dpprefsyn.train.modeling import load_causal_lm

    if resolve_backend(config.backend) == "vllm":
        return _generate_vllm(model_name_or_path, prompts, config)
    model, tokenizer = load_causal_lm(
        model_name_or_path, dtype=config.dtype, device_map=config.device_map
    )
    try:
        return generate_with_model(model, tokenizer, prompts, config, desc=desc)
    finally:
        del model
        release_memory()


def generate_with_model(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    config: WinRateConfig,
    *,
    desc: str = "generate",
) -> list[str]:
    """One answer per prompt from a loaded model: left-padded batches of similar length.

    Decoding uses only the settings of ``config`` (greedy or ``temperature``/``top_p``), not
    the sampling defaults a checkpoint may carry, so a policy and its baseline decode alike.
    Sampling is seeded per batch, from ``config.seed``, ``desc`` (the role: policy and
    baseline draw independently) and the batch's prompts, under ``fork_rng``: the global RNG
    is untouched.
    """
    import torch
    from transformers import GenerationConfig

    from dpprefsyn.synth.backends.base import derive_seed
    from dpprefsyn.train.modeling import chat_texts, encoded_batches, eos_token_ids

    texts, special = chat_texts(tokenizer, list(prompts), chat_template=config.chat_template)
    sample = config.temperature > 0
    sampling = {"temperature": config.temperature, "top_p": config.top_p, "top_k": 0}
    generation = GenerationConfig(
        max_new_tokens=config.max_new_tokens,
        do_sample=sample,
        **(sampling if sample else {}),
        eos_token_id=eos_token_ids(model.generation_config, tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=model.generation_config.bos_token_id,
    )
    device = model.device
    forks = [device.index or 0] if device.type == "cuda" else []
    answers = [""] * len(texts)
    batches = encoded_batches(
        tokenizer,
        texts,
        batch_size=config.batch_size,
        padding_side="left",
        add_special_tokens=special,
        device=device,
        desc=desc,
        progress=config.progress,
    )
    for batch, enc in batches:
        with torch.random.fork_rng(devices=forks), torch.inference_mode():
            torch.manual_seed(derive_seed(config.seed, desc, *(texts[i] for i in batch)))
            out = model.generate(**enc, generation_config=generation)
        new = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        for i, text in zip(batch, new, strict=True):
            answers[i] = text.strip()
    return answers


def resolve_backend(name: str) -> str:
    """``auto`` is vLLM when it is installed and CUDA is present, else transformers."""
    if name != "auto":
        return name
    from dpprefsyn.synth.backends import vllm_usable

    return "vllm" if vllm_usable() else "transformers"


def _generate_vllm(
    model_name_or_path: str | os.PathLike[str], prompts: Sequence[str], cfg: WinRateConfig
) -> list[str]:
    try:
        from vllm import LLM, SamplingParams
    except ImportError as err:
        raise ImportError("backend='vllm' needs vLLM: pip install 'dpprefsyn[gpu]'") from err
    from transformers import AutoTokenizer

    name = os.fspath(model_name_or_path)
    chat = cfg.chat_template
    if chat is None:
        chat = bool(AutoTokenizer.from_pretrained(name).chat_template)
    llm = LLM(
        model=name,
        dtype=cfg.dtype or "auto",
        seed=cfg.seed,
        gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
    )
    params = SamplingParams(
        temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_new_tokens, seed=cfg.seed
    )
    if chat:
        messages = [[{"role": "user", "content": p}] for p in prompts]
        outputs = llm.chat(messages, params, use_tqdm=cfg.progress)
    else:
        outputs = llm.generate(list(prompts), params, use_tqdm=cfg.progress)
    answers = [output.outputs[0].text.strip() for output in outputs]
    del llm
    release_memory()
    return answers


def release_memory() -> None:
    """Return a deleted model's GPU memory before the next model loads."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
