"""Statistics of pairwise verdicts: win rates over prompts, their intervals, judge diagnostics.

Each record is one prompt judged twice (the policy's answer first, then second) as
:func:`~dpprefsyn.train.winrate.win_rate` writes it: ``win`` (order-averaged probability that
the policy's answer is better), ``outcome`` (win, tie or loss), ``p_a_policy_first``,
``p_a_policy_second``, ``label_mass``, ``identical``, and the two answers. Prompts are the
units of resampling: they are what was drawn from a population.
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np


def confidence_interval(
    scores: np.ndarray,
    *,
    method: str = "bootstrap",
    confidence: float = 0.95,
    n_bootstrap: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Interval for the mean of per-prompt ``scores`` in [0, 1], prompts resampled as units."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size < 2:
        return (float(scores.mean()),) * 2 if scores.size else (float("nan"),) * 2
    alpha = 1 - confidence
    if method == "normal":
        half = statistics.NormalDist().inv_cdf(1 - alpha / 2) * scores.std(ddof=1)
        half /= np.sqrt(scores.size)
        return max(0.0, float(scores.mean() - half)), min(1.0, float(scores.mean() + half))
    rng = np.random.default_rng(seed)
    means = scores[rng.integers(0, scores.size, (n_bootstrap, scores.size))].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def summarise(
    records: list[dict[str, Any]],
    *,
    method: str = "bootstrap",
    confidence: float = 0.95,
    n_bootstrap: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Win rates with intervals, outcome counts, judge diagnostics and answer lengths.

    ``win_rate`` is the mean order-averaged probability that the policy's answer is better.
    ``win_rate_discrete`` counts a win where the judge picks the policy in both orders, a loss
    where it picks the baseline in both, and a tie (one half) where the orders disagree or the
    answers are identical, as MT-Bench's pairwise judging with swapped positions does.
    ``position_bias`` is the judge's mean probability of label A over all comparisons (0.5: no
    bias; the order averaging cancels it either way), ``order_agreement`` the share of prompts
    whose two orders pick the same answer, and ``mean_label_mass`` the judge's probability on
    the two labels at all (low: it did not understand that it must answer with a label).
    """
    win = np.array([r["win"] for r in records])
    outcome = np.array([r["outcome"] for r in records])
    discrete = (outcome == "win") + 0.5 * (outcome == "tie")
    judged = [r for r in records if r["p_a_policy_first"] is not None]
    p_a = [p for r in judged for p in (r["p_a_policy_first"], r["p_a_policy_second"])]
    masses = [r["label_mass"] for r in judged if r["label_mass"] is not None]
    ci = {"method": method, "confidence": confidence, "n_bootstrap": n_bootstrap, "seed": seed}
    return {
        "n": len(records),
        "win_rate": float(win.mean()),
        "ci": list(confidence_interval(win, **ci)),
        "win_rate_discrete": float(discrete.mean()),
        "ci_discrete": list(confidence_interval(discrete, **ci)),
        "ci_method": method,
        "confidence": confidence,
        "wins": int((outcome == "win").sum()),
        "ties": int((outcome == "tie").sum()),
        "losses": int((outcome == "loss").sum()),
        "identical": sum(r["identical"] for r in records),
        "position_bias": float(np.mean(p_a)) if p_a else None,
        "order_agreement": _order_agreement(judged),
        "mean_label_mass": float(np.mean(masses)) if masses else None,
        "lengths": _lengths(records, win),
    }


def _order_agreement(judged: list[dict[str, Any]]) -> float | None:
    """Share of judged prompts whose two orders pick the same answer."""
    if not judged:
        return None
    agree = [(r["p_a_policy_first"] > 0.5) == (r["p_a_policy_second"] < 0.5) for r in judged]
    return float(np.mean(agree))


def _lengths(records: list[dict[str, Any]], win: np.ndarray) -> dict[str, Any]:
    """Mean answer lengths and their link to the verdicts: judges favour longer answers."""
    words = {k: np.array([len(r[k].split()) for r in records]) for k in ("policy", "baseline")}
    chars = {k: float(np.mean([len(r[k]) for r in records])) for k in ("policy", "baseline")}
    diff = words["policy"] - words["baseline"]
    corr = float(np.corrcoef(diff, win)[0, 1]) if diff.std() > 0 and win.std() > 0 else None
    mean_p, mean_b = float(words["policy"].mean()), float(words["baseline"].mean())
    note = (
        f"policy answers average {mean_p:.0f} words, the baseline's {mean_b:.0f}; LLM judges "
        "favour longer answers, so read a win rate next to the length gap (not length-controlled)"
    )
    return {
        "policy_words": mean_p,
        "baseline_words": mean_b,
        "policy_chars": chars["policy"],
        "baseline_chars": chars["baseline"],
        "length_win_correlation": corr,
        "note": note,
    }
