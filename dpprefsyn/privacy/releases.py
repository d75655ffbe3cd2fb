"""One DP release, described well enough for the accountant to compose it."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Mechanism = Literal["laplace", "gaussian", "subsampled_gaussian", "pure"]


@dataclass(frozen=True)
class Release:
    """A differentially private output of one stage.

    Parameters
    ----------
    stage : str
        Pipeline stage that made it (``"count"``, ``"pca"``, ``"histogram"``, ``"reward"``...).
    mechanism : {"laplace", "gaussian", "subsampled_gaussian", "pure"}
        ``gaussian`` is tracked as GDP with ``mu = sensitivity / noise_std`` per step.
        ``laplace``/``pure`` carry a pure ``epsilon``. ``subsampled_gaussian`` is DP-SGD:
        it carries its standalone ``(epsilon, delta)`` share fixed before the data were read,
        plus the parameters that realised it (checked with the PRV accountant).
    epsilon, delta : float
        Standalone guarantee of this release (``delta = 0`` for pure mechanisms). For a
        Gaussian it is informational; composition uses ``mu``.
    mu : float, default=0.0
        GDP parameter of a Gaussian release (all its steps together).
    group : str or None, default=None
        Releases of one group act on disjoint sets of records (parallel composition):
        the group costs what its most expensive member costs.
    params : dict
        What produced it: noise multiplier, sensitivity, sampling rate, steps, bounds.
        Never private values.
    """

    stage: str
    mechanism: Mechanism
    epsilon: float
    delta: float = 0.0
    mu: float = 0.0
    group: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mechanism == "gaussian" and not self.mu > 0:
            raise ValueError(f"{self.stage}: a Gaussian release needs mu > 0")
        if self.mechanism != "gaussian" and not (self.epsilon >= 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"{self.stage}: epsilon must be finite and >= 0")
        if not 0 <= self.delta < 1:
            raise ValueError(f"{self.stage}: delta must be in [0, 1)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Release:
        return cls(**d)
