"""Membership scores of canaries in a linear model: least squares, not dot products.

A linear model trained from zero by gradient steps, or by one Newton step, has its weights in
the span of its training rows (plus its noise). A canary's dot product with the weights also
picks up every other row's share through their overlaps, and with many canaries that
cross-talk hides the canary's own share. Regressing the weights on all candidate rows, the
canaries and the records known to be in, recovers each row's own coefficient instead: exactly
so without noise when the rows are linearly independent (``m + n_known <= d``). A stronger
attack makes a tighter audit, and the score is a function of the output and public rows only,
as the audit requires. That interference between canaries is what limits one-run audits
("How Well Can Differential Privacy Be Audited in One Run?", arXiv:2503.07199).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lstsq

__all__ = ["linear_scores"]


def linear_scores(
    weights: np.ndarray, canaries: np.ndarray, *, known: np.ndarray | None = None
) -> np.ndarray:
    """Coefficient of each canary in the least-squares fit of ``weights`` on the rows.

    Parameters
    ----------
    weights : numpy.ndarray of shape (d,)
        The model's weight vector (e.g. a reward direction).
    canaries : numpy.ndarray of shape (m, d)
        Feature rows of the canaries, in the same space as ``weights``.
    known : numpy.ndarray of shape (n, d) or None, default=None
        Rows known to be in the training data (the non-canary records): fitted alongside, so
        their share is not attributed to a canary.

    Returns
    -------
    numpy.ndarray of shape (m,)
        Higher means "more likely trained on" for a model that moves toward its rows.

    Raises
    ------
    ValueError
        On mismatched shapes or non-finite values.
    """
    weights = np.asarray(weights, dtype=np.float64)
    canaries = np.asarray(canaries, dtype=np.float64)
    if weights.ndim != 1 or canaries.ndim != 2 or canaries.shape[1] != weights.size:
        raise ValueError(
            f"need weights (d,) and canaries (m, d), got {weights.shape} and {canaries.shape}"
        )
    rows = canaries
    if known is not None:
        known = np.asarray(known, dtype=np.float64)
        if known.ndim != 2 or known.shape[1] != weights.size:
            raise ValueError(f"known must be (n, {weights.size}), got {known.shape}")
        rows = np.vstack([canaries, known])
    # QR with column pivoting: several times faster than the SVD of np.linalg.lstsq, and still
    # a least-squares answer when the rows are dependent (m + n > d).
    if not (np.isfinite(weights).all() and np.isfinite(rows).all()):
        raise ValueError("weights and rows must be finite")
    coef = lstsq(rows.T, weights, lapack_driver="gelsy", check_finite=False)[0]
    return coef[: len(canaries)]
