"""Candidate generation backends, by name: ``vllm``, ``transformers`` and ``pool``.

>>> backend = make_backend("pool", sources=["model_outputs.json"]).load()  # doctest: +SKIP
>>> backend.generate(["Tell me a joke."], n=5, seed=0)  # doctest: +SKIP
[[Candidate(text=..., generator=..., temperature=None), ...]]

Importing this package imports neither torch, transformers nor vllm: each backend imports what
it needs in ``load()``.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from dpprefsyn.synth.backends.base import Candidate, CandidateBackend, SamplingBackend
from dpprefsyn.synth.backends.hf import TransformersBackend
from dpprefsyn.synth.backends.pool import PoolBackend, PoolSource
from dpprefsyn.synth.backends.vllm import VLLMBackend

BACKENDS: dict[str, type[CandidateBackend]] = {}
"""Backend name -> class; fill it with :func:`register_backend` only."""

CPU_FALLBACKS: tuple[str, ...] = ("pool", "transformers")


def register_backend(cls: type[CandidateBackend]) -> type[CandidateBackend]:
    """Add a backend class under its ``name``; usable as a class decorator.

    Raises
    ------
    ValueError
        The name is already taken: silently replacing a backend would change what a config
        means.
    """
    if cls.name in BACKENDS:
        raise ValueError(f"a candidate backend named {cls.name!r} is already registered")
    BACKENDS[cls.name] = cls
    return cls


for _backend in (VLLMBackend, TransformersBackend, PoolBackend):
    register_backend(_backend)


def vllm_usable() -> bool:
    """Tell whether a CUDA device and an installed vLLM are both present."""
    import torch

    return torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None


def make_backend(
    name: str, /, *, cpu_fallback: str | None = None, **settings: Any
) -> CandidateBackend:
    """Build (but do not load) a backend from its name and settings.

    Parameters
    ----------
    name : str
        A key of :data:`BACKENDS`, or ``"auto"``: ``"vllm"`` when :func:`vllm_usable`, else
        ``cpu_fallback``.
    cpu_fallback : {"pool", "transformers"} or None, default=None
        Only with ``"auto"``, where None means ``"pool"``.
    **settings
        The backend's settings. With ``"auto"``, one mapping per candidate backend instead,
        keyed by backend name (``vllm={...}, pool={...}``), since backends take different
        settings; only the chosen one is used.

    Raises
    ------
    ValueError
        Unknown name or fallback, ``cpu_fallback`` without ``"auto"``, or, with ``"auto"``, no
        settings for the chosen backend.
    pydantic.ValidationError
        A setting is unknown (``extra="forbid"``) or out of range.
    """
    if name == "auto":
        fallback = cpu_fallback or "pool"
        if fallback not in CPU_FALLBACKS:
            raise ValueError(f"cpu_fallback must be one of {CPU_FALLBACKS}, got {fallback!r}")
        unknown = set(settings) - set(BACKENDS)
        if unknown:
            raise ValueError(
                f"with 'auto', settings are keyed by backend name {sorted(BACKENDS)}; "
                f"got {sorted(unknown)}"
            )
        name = "vllm" if vllm_usable() else fallback
        if name not in settings:
            raise ValueError(f"'auto' chose {name!r} but no {name}= settings were given")
        settings = dict(settings[name])
    elif cpu_fallback is not None:
        raise ValueError("cpu_fallback only applies to name='auto'")
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose from {['auto', *BACKENDS]}")
    return BACKENDS[name].model_validate(settings)


__all__ = [
    "BACKENDS",
    "Candidate",
    "CandidateBackend",
    "PoolBackend",
    "PoolSource",
    "SamplingBackend",
    "TransformersBackend",
    "VLLMBackend",
    "make_backend",
    "register_backend",
    "vllm_usable",
]
