"""The contract every candidate backend fulfils, and the rules they share.

A backend is a pydantic model (``extra="forbid"``, so a typo in a YAML config fails loudly) whose
fields are its settings. Heavy resources (model weights, files) open in :meth:`load`, never in
``__init__``, so configs can be built, validated and fingerprinted on a machine that could not
run them. :meth:`CandidateBackend.generate` is the same for every backend: it checks its
arguments, asks the backend for raw candidates, and drops empty and repeated texts, because two
identical candidates cannot form a preference pair.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator


@dataclass(frozen=True)
class Candidate:
    """One candidate response to a prompt.

    Parameters
    ----------
    text : str
        The response, without the prompt.
    generator : str
        The model (or pool source) that wrote it, for per-generator analyses.
    temperature : float or None, default=None
        Sampling temperature it was drawn at; None for pre-generated pools.
    """

    text: str
    generator: str
    temperature: float | None = None


def derive_seed(seed: int, *parts: object) -> int:
    """Derive a 31-bit seed from ``seed`` and what a request is about (prompt, temperature).

    Seeding each request from its own content rather than from its position makes a resumed or
    re-sharded run draw the same candidates for the same prompt.
    """
    digest = hashlib.sha256(repr((seed, *parts)).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def distinct(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Drop empty texts and repeats (after stripping whitespace), keeping the first of each."""
    seen: set[str] = set()
    kept = []
    for candidate in candidates:
        key = candidate.text.strip()
        if key and key not in seen:
            seen.add(key)
            kept.append(candidate)
    return kept


class CandidateBackend(BaseModel, ABC):
    """Turns public prompts into up to ``n`` candidate responses each.

    Subclasses set ``name``, list in ``runtime_fields`` the settings that cannot change what is
    generated (batch size, device, memory), and implement :meth:`load` and :meth:`_generate`.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: ClassVar[str]
    runtime_fields: ClassVar[frozenset[str]] = frozenset()

    _loaded: bool = PrivateAttr(default=False)

    @abstractmethod
    def load(self) -> Self:
        """Open the heavy resources; returns ``self`` so ``backend.load().generate(...)`` reads."""

    @abstractmethod
    def _generate(self, prompts: list[str], n: int, seed: int) -> list[list[Candidate]]:
        """Raw candidates, one list per prompt; :meth:`generate` filters them."""

    def generate(self, prompts: Sequence[str], *, n: int, seed: int) -> list[list[Candidate]]:
        """Up to ``n`` distinct, non-empty candidates per prompt, in prompt order.

        Deterministic for ``(prompts, n, seed)`` and the backend's settings, so a checkpointed
        shard that is run again reproduces. A prompt may get fewer than ``n`` (an empty list
        when a pool has nothing for it); the caller counts those.

        Raises
        ------
        RuntimeError
            :meth:`load` has not been called.
        ValueError
            ``n`` is not a positive integer, ``seed`` not an integer, or a prompt not a string.
        """
        if not self._loaded:
            raise RuntimeError(f"{type(self).__name__}.load() must be called before generate()")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        if isinstance(prompts, str) or not all(isinstance(p, str) for p in prompts):
            raise ValueError("prompts must be a sequence of strings")
        prompts = list(prompts)
        if not prompts:
            return []
        raw = self._generate(prompts, n, seed)
        return [distinct(candidates)[:n] for candidates in raw]

    def signature(self) -> dict[str, Any]:
        """Return the settings that can change the candidates, for the pipeline's cache key.

        ``n`` and ``seed`` are arguments of :meth:`generate`, so the caller adds them.
        """
        return {"backend": self.name, **self.model_dump(mode="json", exclude=self.runtime_fields)}


class SamplingBackend(CandidateBackend):
    """Settings shared by the backends that sample from a language model.

    ``mixed_temperatures`` splits each prompt's ``n`` draws across several temperatures (the
    first ones get the remainder), so one pool holds both cautious and adventurous answers and
    the preference model has a real spread to choose best and worst from. When it is set,
    ``temperature`` is not used.
    """

    model: str = Field(description="Hugging Face hub name or local directory of the model.")
    temperature: float = Field(default=0.9, gt=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    mixed_temperatures: list[float] | None = None
    chat_template: bool = Field(
        default=True, description="Wrap each prompt as one user message with the chat template."
    )

    @field_validator("mixed_temperatures")
    @classmethod
    def _positive_temperatures(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and (not value or any(t <= 0 for t in value)):
            raise ValueError("mixed_temperatures must be a non-empty list of positive numbers")
        return value

    @property
    def temperatures(self) -> list[float]:
        """The temperatures actually sampled at."""
        return list(self.mixed_temperatures or [self.temperature])

    def temperature_plan(self, n: int) -> list[tuple[float, int]]:
        """``(temperature, draws)`` for each temperature that gets at least one of ``n`` draws."""
        temps = self.temperatures
        base, extra = divmod(n, len(temps))
        plan = [(t, base + (i < extra)) for i, t in enumerate(temps)]
        return [(t, k) for t, k in plan if k > 0]

    def signature(self) -> dict[str, Any]:
        """Model, effective temperatures and decoding limits; not device or memory settings."""
        signature = super().signature()
        del signature["temperature"], signature["mixed_temperatures"]
        return {**signature, "temperatures": self.temperatures}
