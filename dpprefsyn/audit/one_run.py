"""One-run privacy audit (Steinke, Nasr and Jagielski 2023): pure math, no mechanism.

``m`` canaries are each put into the training data independently with probability 1/2; after
one training run an attacker guesses, from the output alone, which canaries went in ("in" for
the highest scores, "out" for the lowest, abstaining on the rest). Under ``(epsilon, delta)``-DP
the number of correct guesses cannot be much larger than under ``Binomial(r, e^eps/(1+e^eps))``,
so many correct guesses refute the claim, and the largest refuted ``epsilon`` is an empirical
lower bound on the mechanism's true epsilon. One run suffices, which makes this affordable in a
unit test; the price is a loose bound (a bound below the claim proves nothing, a bound above it
proves a bug).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit
from scipy.stats import binom

__all__ = ["AuditResult", "audit", "epsilon_lower_bound", "insert_canaries", "p_value"]

# Grid on [0, pure-DP bound] on which the delta-aware p-value is scanned before root finding;
# it need not be monotone in epsilon, and the scan finds the largest refuted value anyway.
_GRID = 64


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit.

    Attributes
    ----------
    epsilon_lower_bound : float
        Largest epsilon refuted at the audit's confidence; 0.0 when none is.
    n_guesses : int
        Number of canaries guessed on (``k_pos + k_neg``).
    n_correct : int
        Number of those guesses that were right.
    n_canaries : int
        Number of canaries ``m`` (each in with probability 1/2).
    """

    epsilon_lower_bound: float
    n_guesses: int
    n_correct: int
    n_canaries: int


def _check_counts(n_guesses: int, n_correct: int, n_canaries: int) -> None:
    for name, value in (
        ("n_guesses", n_guesses),
        ("n_correct", n_correct),
        ("n_canaries", n_canaries),
    ):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if not n_correct <= n_guesses <= n_canaries:
        raise ValueError(
            f"need n_correct <= n_guesses <= n_canaries, got {n_correct}, {n_guesses}, {n_canaries}"
        )


def _p_values(
    n_guesses: int, n_correct: int, n_canaries: int, epsilons: np.ndarray, delta: float
) -> np.ndarray:
    """:func:`p_value` at each of ``epsilons`` (validated inputs), in one vectorised pass."""
    q = expit(np.asarray(epsilons, dtype=np.float64))[:, None]
    tail = binom.sf(n_correct - 1, n_guesses, q)[:, 0]
    if delta == 0 or n_correct == 0:
        return tail
    i = np.arange(1, n_correct + 1)
    excess = (binom.sf(n_correct - i - 1, n_guesses, q) - tail[:, None]) / i
    return np.minimum(1.0, tail + 2 * n_canaries * delta * excess.max(axis=1))


def p_value(
    n_guesses: int, n_correct: int, *, n_canaries: int, epsilon: float, delta: float = 0.0
) -> float:
    """Probability bound of at least ``n_correct`` right guesses under ``(epsilon, delta)``-DP.

    Parameters
    ----------
    n_guesses : int
        Number of guesses ``r``.
    n_correct : int
        Number of correct guesses ``v``.
    n_canaries : int
        Number of randomised canaries ``m``; ``delta`` is paid once per canary.
    epsilon : float
        Claimed epsilon, ``>= 0``.
    delta : float, default=0.0
        Claimed delta in ``[0, 1)``.

    Returns
    -------
    float
        ``f(v) + 2 m delta max_{1<=i<=v} (f(v-i) - f(v)) / i``, capped at 1, where
        ``f(v) = P[Binomial(r, e^eps / (1 + e^eps)) >= v]``; just ``f(v)`` when ``delta = 0``.

    References
    ----------
    Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023
    (arXiv:2305.08846): the pure-DP bound and its ``(epsilon, delta)`` version.
    """
    _check_counts(n_guesses, n_correct, n_canaries)
    if not (epsilon >= 0 and np.isfinite(epsilon)):
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon}")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta}")
    return float(_p_values(n_guesses, n_correct, n_canaries, np.array([epsilon]), delta)[0])


def epsilon_lower_bound(
    n_guesses: int,
    n_correct: int,
    *,
    n_canaries: int,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> float:
    """Largest epsilon that ``n_correct`` right guesses out of ``n_guesses`` refute.

    An ``(epsilon, delta)`` claim is refuted when :func:`p_value` is at most
    ``1 - confidence``. If the mechanism really is ``(epsilon, delta)``-DP, the returned value
    exceeds its epsilon with probability at most ``1 - confidence``.

    Parameters
    ----------
    n_guesses : int
        Number of guesses ``r`` (abstentions excluded); fixed before looking at the scores.
    n_correct : int
        Number of correct guesses.
    n_canaries : int
        Number of randomised canaries ``m >= n_guesses``.
    delta : float, default=0.0
        Claimed delta; a positive delta weakens what the guesses prove.
    confidence : float, default=0.95
        Probability that the bound is valid, in ``(0, 1)``.

    Returns
    -------
    float
        The lower bound, ``0.0`` when not even ``epsilon = 0`` is refuted.

    Raises
    ------
    ValueError
        If the counts are negative, ``n_correct > n_guesses``, ``n_guesses > n_canaries``,
        ``delta`` is outside ``[0, 1)`` or ``confidence`` outside ``(0, 1)``.

    References
    ----------
    Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023
    (arXiv:2305.08846).

    Examples
    --------
    >>> round(epsilon_lower_bound(100, 100, n_canaries=1000), 2)
    3.49
    >>> epsilon_lower_bound(100, 50, n_canaries=1000)
    0.0
    """
    _check_counts(n_guesses, n_correct, n_canaries)
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    alpha = 1.0 - confidence

    def refuted_by(eps: float, d: float) -> float:
        # Positive where the (eps, d) claim is refuted.
        return alpha - float(_p_values(n_guesses, n_correct, n_canaries, np.array([eps]), d)[0])

    if n_correct == 0 or refuted_by(0.0, 0.0) < 0:
        return 0.0
    # Pure DP: the p-value increases with epsilon, so bracket the crossing by doubling.
    hi = 1.0
    while refuted_by(hi, 0.0) >= 0:
        hi *= 2
    pure = float(brentq(refuted_by, 0.0, hi, args=(0.0,), xtol=1e-9))
    if delta == 0:
        return pure
    # delta adds a non-negative term, so nothing above the pure bound is refuted; the
    # delta-aware p-value need not be monotone, so scan for the largest refuted grid point.
    grid = np.linspace(0.0, pure, _GRID + 1)
    ok = np.flatnonzero(_p_values(n_guesses, n_correct, n_canaries, grid, delta) <= alpha)
    if ok.size == 0:
        return 0.0
    j = int(ok[-1])
    if j == _GRID:
        return pure
    return float(brentq(refuted_by, grid[j], grid[j + 1], args=(delta,), xtol=1e-9))


def audit(
    scores: np.ndarray,
    included: np.ndarray,
    *,
    k_pos: int,
    k_neg: int,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> AuditResult:
    """Guess "in" for the ``k_pos`` highest scores and "out" for the ``k_neg`` lowest.

    ``k_pos`` and ``k_neg`` must be fixed before the scores are seen: trying several and keeping
    the best is a multiple comparison that this bound does not pay for. Ties are broken by
    canary index, which does not depend on the inclusion bits.

    Parameters
    ----------
    scores : numpy.ndarray of shape (m,)
        Membership score of each canary, higher meaning "more likely trained on"; computed
        from the mechanism's output and the public canaries only.
    included : numpy.ndarray of shape (m,)
        Boolean inclusion mask, as drawn by :func:`insert_canaries`.
    k_pos, k_neg : int
        Numbers of "in" and "out" guesses, ``k_pos + k_neg <= m``.
    delta : float, default=0.0
        Claimed delta of the mechanism.
    confidence : float, default=0.95

    Returns
    -------
    AuditResult

    Raises
    ------
    ValueError
        On mismatched or non-finite inputs, negative ``k``, or ``k_pos + k_neg > m``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    included = np.asarray(included)
    if scores.ndim != 1 or included.shape != scores.shape:
        raise ValueError(f"scores and included must be 1-D of one shape, got {scores.shape} "
                         f"and {included.shape}")  # fmt: skip
    if included.dtype != np.bool_:
        raise ValueError(f"included must be a boolean mask, got dtype {included.dtype}")
    if not np.isfinite(scores).all():
        raise ValueError("scores contain non-finite values")
    m = scores.size
    for name, k in (("k_pos", k_pos), ("k_neg", k_neg)):
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {k!r}")
    if k_pos + k_neg > m:
        raise ValueError(f"k_pos + k_neg = {k_pos + k_neg} exceeds the {m} canaries")
    order = np.argsort(-scores, kind="stable")
    top, bottom = order[:k_pos], order[m - k_neg :]
    n_correct = int(included[top].sum() + (~included[bottom]).sum())
    n_guesses = int(k_pos + k_neg)
    bound = epsilon_lower_bound(
        n_guesses, n_correct, n_canaries=m, delta=delta, confidence=confidence
    )
    return AuditResult(bound, n_guesses, n_correct, m)


def insert_canaries(n_canaries: int, rng: np.random.Generator) -> np.ndarray:
    """Draw which canaries go into the training data: each independently with probability 1/2.

    The independent fair coins are what the audit's Binomial comparison assumes.

    Parameters
    ----------
    n_canaries : int
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray of shape (n_canaries,), dtype bool
    """
    if isinstance(n_canaries, bool) or not isinstance(n_canaries, int | np.integer):
        raise ValueError(f"n_canaries must be an integer, got {n_canaries!r}")
    if n_canaries < 1:
        raise ValueError(f"n_canaries must be positive, got {n_canaries}")
    return rng.random(n_canaries) < 0.5
