"""Neighbouring-dataset distinguishing test: an empirical lower bound on a mechanism's epsilon.

A mechanism ``M`` is ``(epsilon, delta)``-DP when, for neighbouring datasets ``D, D'`` and
every event ``S``, ``P[M(D) in S] <= e^epsilon P[M(D') in S] + delta`` (and with ``D, D'``
swapped). Run the mechanism many times on a fixed pair ``D, D'``, reduce each output to a
scalar statistic, and look for an event that breaks the inequality: a violation at a stated
confidence proves a bug, and the largest ``epsilon`` refuted is a lower bound on the true one.

The recipe is StatDP's and DP-Sniper's (Ding et al. 2018; Bichsel et al. 2021), which
diffprivlib and OpenDP use to test their samplers:

1. **Select** the event on a *first* half of the runs: among ``S = {stat > t}`` and
   ``S = {stat < t}``, ``t`` between consecutive distinct observed values, the one whose
   confidence-bounded ratio is largest. Looking at the data to choose ``S`` is what makes
   the test powerful, and is why the data used to choose it cannot be used to judge it.
2. **Judge** the chosen event on the *second*, independent half: Clopper-Pearson bounds give
   ``p_lo <= P[M(D) in S]`` and ``p'_hi >= P[M(D') in S]``, each failing with probability at
   most ``alpha / 4`` (two bounds per direction, two directions: Bonferroni), so with
   probability at least ``confidence = 1 - alpha`` every reported bound is valid at once, and
   ``log((p_lo - delta) / p'_hi)`` is below the true epsilon.

A correct mechanism is refuted with probability at most ``1 - confidence``; a bound below the
claim proves nothing (the test may simply lack runs). The largest bound ``n`` runs can show is
about ``log(n / log(4 / alpha))``: a mechanism with no noise at all is caught at
``epsilon`` below that, and a subtle miscalibration needs many more runs.

References
----------
.. [1] Ding, Z., Wang, Y., Wang, G., Zhang, D. and Kifer, D. "Detecting violations of
   differential privacy", CCS 2018 (StatDP).
.. [2] Bichsel, B., Steffen, S., Bogunovic, I. and Vechev, M. "DP-Sniper: black-box discovery
   of differential privacy violations using classifiers", IEEE S&P 2021.
.. [3] Clopper, C. J. and Pearson, E. S. "The use of confidence or fiducial limits
   illustrated in the case of the binomial", Biometrika 1934.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import beta

__all__ = ["DistinguishResult", "EventBound", "clopper_pearson", "distinguish"]

# Each direction's ratio uses two one-sided bounds, and both directions are reported.
_BOUNDS_PER_TEST = 4


def clopper_pearson(
    hits: np.ndarray | int, trials: np.ndarray | int, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper-Pearson bounds on a binomial probability, each failing w.p. ``alpha``.

    Exact (conservative) rather than a normal approximation, because the events that separate
    neighbours best are often rare, where the normal approximation undercovers.

    Parameters
    ----------
    hits, trials : int or ndarray of int
        Successes ``k`` and trials ``n`` (broadcast together), ``0 <= k <= n``, ``n >= 1``.
    alpha : float
        Error of each bound, in (0, 1).

    Returns
    -------
    lower, upper : ndarray of float
        ``P[p < lower] <= alpha`` and ``P[p > upper] <= alpha``; ``lower = 0`` at ``k = 0`` and
        ``upper = 1`` at ``k = n``. ``upper > 0`` always, so a ratio over it is finite.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    k = np.asarray(hits, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need 0 <= hits <= trials and trials >= 1")
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k > 0, beta.ppf(alpha, np.maximum(k, 1), n - k + 1), 0.0)
        upper = np.where(k < n, beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1)), 1.0)
    return lower, upper


def _log_ratio(p_lower: np.ndarray, p_upper: np.ndarray, delta: float) -> np.ndarray:
    """``log((p_lower - delta) / p_upper)``, ``-inf`` where the numerator is not positive."""
    num = np.asarray(p_lower, dtype=np.float64) - delta
    den = np.asarray(p_upper, dtype=np.float64)
    positive = num > 0
    ratio = np.where(positive, num, 1.0) / np.where(den > 0, den, 1.0)
    out = np.where(positive, np.log(ratio), -np.inf)
    # Clopper-Pearson upper bounds are positive; the guard keeps a hand-made zero from dividing.
    return np.where(positive & (den <= 0), np.inf, out)


@dataclass(frozen=True)
class EventBound:
    """The event chosen for one direction, judged on the held-out runs.

    Attributes
    ----------
    numerator : {"first", "second"}
        Which sample's probability is bounded from below (``"first"``: ``P[M(D) in S]``
        against ``e^eps P[M(D') in S] + delta``; ``"second"``: the swapped inequality).
    side : {">", "<"}
        ``S = {stat > threshold}`` or ``S = {stat < threshold}``.
    threshold : float
        Midway between two consecutive distinct values of the selection runs, so ties in a
        discrete statistic never straddle it.
    p_lower, p_upper : float
        Clopper-Pearson lower bound of the numerator's probability of ``S`` and upper bound of
        the other's, on the held-out runs.
    hits_numerator, hits_denominator, n_numerator, n_denominator : int
        Held-out counts behind the two bounds.
    """

    numerator: Literal["first", "second"]
    side: Literal[">", "<"]
    threshold: float
    p_lower: float
    p_upper: float
    hits_numerator: int
    hits_denominator: int
    n_numerator: int
    n_denominator: int

    def epsilon(self, delta: float) -> float:
        """Epsilon this event refutes at ``delta``: ``log((p_lower - delta) / p_upper)``, >= 0."""
        return max(0.0, float(_log_ratio(self.p_lower, self.p_upper, delta)))


@dataclass(frozen=True)
class DistinguishResult:
    """Outcome of :func:`distinguish`.

    Attributes
    ----------
    epsilon_lower_bound : float
        Largest epsilon refuted at ``delta`` (0.0 when none): with probability at least
        ``confidence`` the mechanism's true epsilon at ``delta`` is at least this.
    delta : float
        The delta the events were selected and the bound computed for.
    confidence : float
        Simultaneous confidence of both directions' bounds.
    events : tuple of EventBound
        The chosen event of each direction (first over second, then second over first).
    n_select, n_test : tuple of int
        Runs of (first, second) used to choose the events and to judge them.
    """

    epsilon_lower_bound: float
    delta: float
    confidence: float
    events: tuple[EventBound, EventBound]
    n_select: tuple[int, int]
    n_test: tuple[int, int]

    def violates(self, epsilon: float, delta: float | None = None) -> bool:
        """Whether the held-out runs refute ``(epsilon, delta)``-DP at ``confidence``.

        True when, for a chosen event, ``p_lo > e^epsilon p'_hi + delta``: with probability at
        least ``confidence`` a correct ``(epsilon, delta)`` mechanism does not get here.
        ``delta`` defaults to the one the events were chosen for; another one is still a valid
        test (the events were chosen on other runs), if a less powerful one.
        """
        d = self.delta if delta is None else delta
        if not 0 <= d < 1:
            raise ValueError(f"delta must be in [0, 1), got {d}")
        return any(e.epsilon(d) > epsilon for e in self.events)

    def summary(self) -> str:
        """One line for a test failure message or a log."""
        best = max(self.events, key=lambda e: e.epsilon(self.delta))
        return (
            f"eps >= {self.epsilon_lower_bound:.3f} at delta={self.delta:g} "
            f"(confidence {self.confidence}): event stat {best.side} {best.threshold:.6g}, "
            f"{best.numerator} {best.hits_numerator}/{best.n_numerator} vs "
            f"{best.hits_denominator}/{best.n_denominator}"
        )


def _check_sample(x: np.ndarray | list[float], name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64).ravel()
    if x.size < 2:
        raise ValueError(f"{name} needs at least 2 runs (one to select, one to test)")
    if np.isnan(x).any():
        raise ValueError(f"{name} has NaN values")
    return x


def _thresholds(pooled: np.ndarray, max_thresholds: int) -> np.ndarray:
    """Midpoints between consecutive distinct values, thinned evenly by rank when too many."""
    values = np.unique(pooled)
    mids = values[:-1] + (values[1:] - values[:-1]) / 2
    if mids.size > max_thresholds:
        mids = mids[np.unique(np.linspace(0, mids.size - 1, max_thresholds).round().astype(int))]
    return mids


def _hits(sorted_x: np.ndarray, t: np.ndarray) -> dict[str, np.ndarray]:
    """Counts of ``x > t`` and ``x < t`` for each threshold."""
    n = sorted_x.size
    return {
        ">": n - np.searchsorted(sorted_x, t, side="right"),
        "<": np.searchsorted(sorted_x, t, side="left"),
    }


def distinguish(
    first: np.ndarray | list[float],
    second: np.ndarray | list[float],
    *,
    delta: float = 0.0,
    confidence: float = 0.99,
    select_fraction: float = 0.5,
    max_thresholds: int = 1000,
) -> DistinguishResult:
    """Lower-bound a mechanism's epsilon from a statistic of its outputs on neighbours.

    Parameters
    ----------
    first, second : array-like of float
        The statistic of independent runs on ``D`` and on ``D'`` (numbers may differ). Runs
        must be i.i.d.: the first ``select_fraction`` of each sample selects the events and
        the rest judges them.
    delta : float, default=0.0
        The claim's delta: the events are chosen to refute ``(eps, delta)`` for the largest
        ``eps``, and the reported bound is at this delta.
    confidence : float, default=0.99
        Probability that every reported bound is valid; a correct mechanism is refuted with
        probability at most ``1 - confidence``.
    select_fraction : float, default=0.5
        Share of each sample used to choose the events.
    max_thresholds : int, default=1000
        Candidate thresholds scanned; a continuous statistic is thinned evenly by rank.

    Returns
    -------
    DistinguishResult

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> d = rng.laplace(0.0, 1.0, 20_000)  # a count of 0 with Laplace noise of scale 1/eps
    >>> d_prime = rng.laplace(1.0, 1.0, 20_000)  # its neighbour: one more record
    >>> result = distinguish(d, d_prime)
    >>> 0.7 < result.epsilon_lower_bound < 1.0, result.violates(1.0)
    (True, False)
    """
    x = _check_sample(first, "first")
    y = _check_sample(second, "second")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if not 0 < select_fraction < 1:
        raise ValueError(f"select_fraction must be in (0, 1), got {select_fraction}")
    if max_thresholds < 1:
        raise ValueError(f"max_thresholds must be at least 1, got {max_thresholds}")
    alpha = (1 - confidence) / _BOUNDS_PER_TEST
    mx = min(max(int(x.size * select_fraction), 1), x.size - 1)
    my = min(max(int(y.size * select_fraction), 1), y.size - 1)
    sel = {"first": np.sort(x[:mx]), "second": np.sort(y[:my])}
    test = {"first": np.sort(x[mx:]), "second": np.sort(y[my:])}

    t = _thresholds(np.concatenate([sel["first"], sel["second"]]), max_thresholds)
    events = []
    for num, den in (("first", "second"), ("second", "first")):
        best = (-np.inf, -np.inf, ">", math.nan)
        if t.size:
            h_num, h_den = _hits(sel[num], t), _hits(sel[den], t)
            for side in (">", "<"):
                lo, _ = clopper_pearson(h_num[side], sel[num].size, alpha)
                _, hi = clopper_pearson(h_den[side], sel[den].size, alpha)
                score = _log_ratio(lo, hi, delta)
                # Where no event clears delta on the selection runs, fall back to the largest
                # gap of frequencies: the held-out bound will be 0 anyway, but stays defined.
                gap = h_num[side] / sel[num].size - h_den[side] / sel[den].size
                i = int(np.argmax(score)) if np.isfinite(score.max()) else int(np.argmax(gap))
                candidate = (float(score[i]), float(gap[i]), side, float(t[i]))
                if candidate[:2] > best[:2]:
                    best = candidate
        _, _, side, threshold = best
        if math.isnan(threshold):  # a single distinct value: no event separates anything
            k_num = k_den = 0
        else:
            k_num = int(_hits(test[num], np.array([threshold]))[side][0])
            k_den = int(_hits(test[den], np.array([threshold]))[side][0])
        lo, _ = clopper_pearson(k_num, test[num].size, alpha)
        _, hi = clopper_pearson(k_den, test[den].size, alpha)
        events.append(
            EventBound(
                numerator=num,
                side=side,
                threshold=threshold,
                p_lower=float(lo),
                p_upper=float(hi),
                hits_numerator=k_num,
                hits_denominator=k_den,
                n_numerator=int(test[num].size),
                n_denominator=int(test[den].size),
            )
        )
    return DistinguishResult(
        epsilon_lower_bound=max(e.epsilon(delta) for e in events),
        delta=float(delta),
        confidence=float(confidence),
        events=(events[0], events[1]),
        n_select=(mx, my),
        n_test=(x.size - mx, y.size - my),
    )
