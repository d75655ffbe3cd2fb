"""Projections fitted on public data: they cost no privacy budget."""

from __future__ import annotations

import numpy as np


def public_projection(public_differences: np.ndarray, n_components: int) -> np.ndarray:
    """Top uncentred principal directions of public response differences, ``(p, d)``.

    Rows are unit-normalised first, as the private rows are, so long answers do not dominate.
    Uncentred, because rewards are linear and compare two responses to one prompt.
    """
    X = np.asarray(public_differences, dtype=np.float64)
    if X.ndim != 2 or len(X) < n_components:
        raise ValueError(
            f"need at least {n_components} public difference vectors, got shape {X.shape}"
        )
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    X = X[norms[:, 0] > 0] / norms[norms[:, 0] > 0]
    # Eigenvectors of the d x d second moment: the same directions as an SVD of X, and about
    # ten times faster when there are many more rows than dimensions.
    eigval, eigvec = np.linalg.eigh(X.T @ X)
    return eigvec[:, np.argsort(eigval)[::-1][:n_components]].T
