"""Random generators for DP noise: OS entropy by default, a seed only when asked for."""

from __future__ import annotations

import secrets

import numpy as np


def make_rng(insecure_seed: int | None = None) -> np.random.Generator:
    """Return the generator DP noise is drawn from.

    With no seed the generator is seeded with 128 bits from the OS CSPRNG, so runs cannot be
    replayed from a guessable seed. ``insecure_seed`` makes runs reproducible for tests; the
    privacy report records that it was used.
    """
    seed = secrets.randbits(128) if insecure_seed is None else insecure_seed
    return np.random.Generator(np.random.PCG64(seed))
