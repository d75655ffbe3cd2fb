"""A generator that records its Gaussian scales: tests check the noise a mechanism adds."""

from __future__ import annotations

import numpy as np


class SpyGenerator(np.random.Generator):
    """A PCG64 generator that records the scale of every Gaussian draw."""

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.PCG64(seed))
        self.scales: list[float] = []

    def normal(self, loc=0.0, scale=1.0, size=None):
        self.scales.append(scale)
        return super().normal(loc, scale, size)
