"""Canary data and a noise-free generator for the one-run audits of the DP stages.

A plain module rather than a conftest, so the test modules import it by a unique name.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpprefsyn.audit import insert_canaries
from dpprefsyn.dp._validation import normalize_rows


class NoiselessGenerator(np.random.Generator):
    """A PCG64 generator whose noise draws are all zero: DP stages drawing from it add none.

    Every mechanism draws its noise with ``normal`` (Gaussian), ``laplace`` (the count) or
    ``standard_normal`` (DP-SGD, from streams made by ``spawn``, which keeps this class);
    sampling (``binomial``, ``integers``, ``random``) is untouched. This is the deliberately
    broken variant an audit must catch.
    """

    def normal(self, loc=0.0, scale=1.0, size=None):
        return np.zeros(size) + loc

    def laplace(self, loc=0.0, scale=1.0, size=None):
        return np.zeros(size) + loc

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        return np.zeros(size, dtype=dtype)


@dataclass(frozen=True)
class CanaryData:
    """``m`` canary preference vectors, each in w.p. 1/2, and the ordinary records beside them.

    Canaries are random unit vectors in ``d >= m + n`` dimensions, so without noise a linear
    model can hold each one's share apart; the ordinary records share one planted direction,
    as real preferences do, and are always in.
    """

    canaries: np.ndarray
    ordinary: np.ndarray
    included: np.ndarray

    @property
    def training(self) -> np.ndarray:
        """Preference vectors the mechanism is trained on: ordinary rows, then canaries in."""
        return np.vstack([self.ordinary, self.canaries[self.included]])


def make_canary_data(m: int, d: int, n_ordinary: int, seed: int) -> CanaryData:
    """Draw the canaries, the ordinary records and the inclusion coins from one seed."""
    rng = np.random.default_rng(seed)
    canaries = normalize_rows(rng.normal(size=(m, d)))
    taste = normalize_rows(rng.normal(size=(1, d)))
    ordinary = normalize_rows(taste + 0.5 * normalize_rows(rng.normal(size=(n_ordinary, d))))
    return CanaryData(canaries, ordinary, insert_canaries(m, rng))
