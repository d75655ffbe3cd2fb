"""vLLM: the fast GPU backend (optional extra ``gpu``; vllm pins a CUDA build of torch).

One request per prompt and temperature, ``SamplingParams(n=k, ...)``: vLLM then shares the
prompt's prefill across the ``k`` samples instead of encoding the prompt ``k`` times. All requests
go to vLLM in a single ``LLM.generate``/``LLM.chat`` call so its scheduler can batch them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import Field, PrivateAttr

from dpprefsyn.synth.backends.base import Candidate, SamplingBackend, derive_seed


class VLLMBackend(SamplingBackend):
    """Sample candidates with vLLM's offline ``LLM`` engine.

    Parameters
    ----------
    model : str
        Hugging Face hub name or local directory.
    temperature : float, default=0.9
        Sampling temperature (ignored when ``mixed_temperatures`` is set).
    max_tokens : int, default=512
        Longest response, in tokens.
    stop : list of str or None, default=None
        Strings that end a response (not included in it).
    top_p : float, default=1.0
        Nucleus sampling mass.
    mixed_temperatures : list of float or None, default=None
        Split each prompt's draws across these temperatures; one request per temperature.
    chat_template : bool, default=True
        Send each prompt as one user message through ``LLM.chat`` (the model's chat template);
        ``False`` sends the raw text through ``LLM.generate``, for base models.
    gpu_memory_utilization : float, default=0.9
        Share of GPU memory vLLM may take; does not change outputs.
    dtype : str, default="auto"
        Weight dtype; part of the signature because it changes the samples.

    Notes
    -----
    Each request is seeded with :func:`~dpprefsyn.synth.backends.base.derive_seed` of the
    run seed, the prompt and the temperature, so results do not depend on batch composition.
    vLLM documents seeded sampling as reproducible on the same hardware and version only.
    """

    name: ClassVar[str] = "vllm"
    runtime_fields: ClassVar[frozenset[str]] = frozenset({"gpu_memory_utilization"})

    max_tokens: int = Field(default=512, ge=1)
    stop: list[str] | None = None
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    dtype: Literal["auto", "float16", "bfloat16", "float32"] = "auto"

    _llm: Any = PrivateAttr(default=None)
    _sampling_params: Any = PrivateAttr(default=None)

    def __init__(self, model: str | None = None, /, **settings: Any) -> None:
        super().__init__(**settings if model is None else {"model": model, **settings})

    def load(self) -> Self:
        """Start the engine (downloads weights on first use; needs a CUDA GPU)."""
        try:
            from vllm import LLM, SamplingParams
        except ImportError as err:
            raise ImportError(
                "the vllm backend needs vLLM: pip install 'dpprefsyn[gpu]' on a CUDA machine"
            ) from err
        self._llm = LLM(
            model=self.model,
            dtype=self.dtype,
            gpu_memory_utilization=self.gpu_memory_utilization,
        )
        self._sampling_params = SamplingParams
        self._loaded = True
        return self

    def _generate(self, prompts: list[str], n: int, seed: int) -> list[list[Candidate]]:
        requests = [
            (index, temperature, draws)
            for index, prompt in enumerate(prompts)
            for temperature, draws in self.temperature_plan(n)
        ]
        params = [
            self._sampling_params(
                n=draws,
                temperature=temperature,
                top_p=self.top_p,
                max_tokens=self.max_tokens,
                stop=self.stop,
                seed=derive_seed(seed, prompts[index], temperature),
            )
            for index, temperature, draws in requests
        ]
        if self.chat_template:
            conversations = [[{"role": "user", "content": prompts[i]}] for i, _, _ in requests]
            outputs = self._llm.chat(conversations, params, use_tqdm=False)
        else:
            outputs = self._llm.generate(
                [prompts[i] for i, _, _ in requests], params, use_tqdm=False
            )
        candidates: list[list[Candidate]] = [[] for _ in prompts]
        for (index, temperature, _), output in zip(requests, outputs, strict=True):
            candidates[index].extend(
                Candidate(text=c.text, generator=self.model, temperature=temperature)
                for c in output.outputs
            )
        return candidates
