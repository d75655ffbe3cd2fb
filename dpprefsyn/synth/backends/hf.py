"""Transformers: the portable backend (CPU or a single GPU, no vLLM needed).

Much slower than vLLM, so meant for small models, CPU-only machines and tests. Prompts are
left-padded into batches and each is sampled ``num_return_sequences`` times in one ``generate``
call; only the new tokens are decoded.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from pydantic import Field, PrivateAttr

from dpprefsyn.synth.backends.base import Candidate, SamplingBackend, derive_seed


class TransformersBackend(SamplingBackend):
    """Sample candidates with ``transformers``' ``generate``.

    Parameters
    ----------
    model : str
        Hugging Face hub name or local directory of a causal language model.
    temperature : float, default=0.9
        Sampling temperature (ignored when ``mixed_temperatures`` is set).
    max_new_tokens : int, default=256
        Longest response, in tokens.
    top_p : float, default=1.0
        Nucleus sampling mass. Top-k filtering is off, as in vLLM, so both backends sample the
        same distribution.
    batch_size : int, default=8
        Prompts per ``generate`` call; memory only, not in the signature.
    device : str or None, default=None
        ``"cuda"`` when available, else ``"cpu"``; not in the signature.
    mixed_temperatures : list of float or None, default=None
        Split each prompt's draws across these temperatures.
    chat_template : bool, default=True
        Wrap each prompt as one user message with the tokenizer's chat template; loading a
        tokenizer without one then fails rather than silently sending raw text.

    Notes
    -----
    Sampling runs under ``torch.random.fork_rng`` seeded per batch (from the run seed, the
    batch's prompts and the temperature), so the global RNG is untouched and a rerun with the
    same prompts, batch size and seed reproduces the candidates. Different batching draws
    different, equally distributed samples.
    """

    name: ClassVar[str] = "transformers"
    runtime_fields: ClassVar[frozenset[str]] = frozenset({"batch_size", "device"})

    max_new_tokens: int = Field(default=256, ge=1)
    batch_size: int = Field(default=8, ge=1)
    device: str | None = None

    _model: Any = PrivateAttr(default=None)
    _tokenizer: Any = PrivateAttr(default=None)

    def __init__(self, model: str | None = None, /, **settings: Any) -> None:
        super().__init__(**settings if model is None else {"model": model, **settings})

    def load(self) -> Self:
        """Load tokenizer and weights onto the device."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.model, padding_side="left")
        if self.chat_template and not tokenizer.chat_template:
            raise ValueError(
                f"the tokenizer of {self.model!r} has no chat template; pass chat_template=False "
                "to send prompts as raw text"
            )
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self._model = AutoModelForCausalLM.from_pretrained(self.model).to(device).eval()
        self._tokenizer = tokenizer
        self._loaded = True
        return self

    def _format(self, prompt: str) -> str:
        if not self.chat_template:
            return prompt
        messages = [{"role": "user", "content": prompt}]
        return self._tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )

    def _sample(self, batch: list[str], temperature: float, draws: int, seed: int) -> list[str]:
        """``draws`` decoded responses per prompt of ``batch``, prompt-major."""
        import torch

        encoded = self._tokenizer(
            [self._format(prompt) for prompt in batch],
            return_tensors="pt",
            padding=True,
            add_special_tokens=not self.chat_template,  # the template places its own tokens
        ).to(self._model.device)
        device = self._model.device
        cuda = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda), torch.inference_mode():
            torch.manual_seed(derive_seed(seed, *batch, temperature))
            output = self._model.generate(
                **encoded,
                do_sample=True,
                temperature=temperature,
                top_p=self.top_p,
                top_k=0,
                max_new_tokens=self.max_new_tokens,
                num_return_sequences=draws,
                pad_token_id=self._tokenizer.pad_token_id,
            )
        new_tokens = output[:, encoded["input_ids"].shape[1] :]
        return self._tokenizer.batch_decode(new_tokens, skip_special_tokens=True)

    def _generate(self, prompts: list[str], n: int, seed: int) -> list[list[Candidate]]:
        candidates: list[list[Candidate]] = [[] for _ in prompts]
        for start in range(0, len(prompts), self.batch_size):
            batch = prompts[start : start + self.batch_size]
            for temperature, draws in self.temperature_plan(n):
                texts = self._sample(batch, temperature, draws, seed)
                for offset, text in enumerate(texts):
                    candidates[start + offset // draws].append(
                        Candidate(text=text, generator=self.model, temperature=temperature)
                    )
        return candidates
