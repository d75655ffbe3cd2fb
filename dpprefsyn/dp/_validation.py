"""Input checks shared by the DP estimators: errors name the row, never its values."""

from __future__ import annotations

import numpy as np


def check_matrix(X: np.ndarray, name: str = "X") -> np.ndarray:
    """Return ``X`` as a 2-D float64 array, rejecting NaN/inf with the offending row index."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows x features), got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError(f"{name} has no rows")
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        raise ValueError(f"{name}: row {int(np.flatnonzero(bad)[0])} has NaN or infinite values")
    return X


def clip_rows(X: np.ndarray, bound: float) -> np.ndarray:
    """Scale rows with L2 norm above ``bound`` down to it (per record, so sensitivity holds)."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X * np.minimum(1.0, bound / np.maximum(norms, 1e-300))


def normalize_rows(X: np.ndarray) -> np.ndarray:
    """Unit-normalise rows; all-zero rows stay zero (they then contribute nothing to any sum)."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.divide(X, norms, out=np.zeros_like(X), where=norms > 0)


def check_budget(epsilon: float, delta: float, name: str) -> None:
    if not (epsilon > 0 and np.isfinite(epsilon)):
        raise ValueError(f"{name}: epsilon must be positive and finite, got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"{name}: delta must be in (0, 1), got {delta}")
