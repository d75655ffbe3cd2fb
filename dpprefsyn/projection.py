"""Projections fitted on public data: they cost no privacy budget."""

from __future__ import annotations

import numpy as np

from dpprefsyn.errors import DataError
from dpprefsyn.loaders.readers import WHOLE_FILE


def public_projection(public_differences: np.ndarray, n_components: int) -> np.ndarray:
    """Top uncentred principal directions of public response differences, ``(p, d)``.

    Rows are unit-normalised first, as the private rows are, so long answers do not dominate.
    Uncentred, because rewards are linear and compare two responses to one prompt.
    """
    X = np.asarray(public_differences, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"public differences must be 2-D, got shape {X.shape}")
    if not np.isfinite(X).all():
        row = int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0])
        raise DataError("public candidate pool", f"difference {row}", "NaN or infinite values")
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    X = X[norms[:, 0] > 0] / norms[norms[:, 0] > 0]
    if len(X) < n_components:
        raise DataError(
            "public candidate pool",
            WHOLE_FILE,
            f"gives {len(X)} distinct within-prompt differences, and the public projection to "
            f"n_components={n_components} dimensions needs at least as many: add public "
            "prompts or candidates, or lower n_components",
        )
    # Eigenvectors of the d x d second moment: the same directions as an SVD of X, and about
    # ten times faster when there are many more rows than dimensions.
    eigval, eigvec = np.linalg.eigh(X.T @ X)
    return eigvec[:, np.argsort(eigval)[::-1][:n_components]].T
