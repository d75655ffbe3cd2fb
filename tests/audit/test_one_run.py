"""The statistics of the one-run audit: bounds, their validity, and input checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import binom

from dpprefsyn.audit import AuditResult, audit, epsilon_lower_bound, insert_canaries, p_value


def test_perfect_guesses_match_the_closed_form() -> None:
    """100 right out of 100 refute eps while q^100 <= 0.05, q = e^eps / (1 + e^eps)."""
    q = 0.05 ** (1 / 100)
    expected = math.log(q / (1 - q))
    assert expected == pytest.approx(3.4930, abs=1e-4)
    assert epsilon_lower_bound(100, 100, n_canaries=1000) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("n_correct", [0, 40, 50, 55])
def test_chance_level_guesses_refute_nothing(n_correct: int) -> None:
    assert epsilon_lower_bound(100, n_correct, n_canaries=1000) == 0.0


def test_no_guesses_refute_nothing() -> None:
    assert epsilon_lower_bound(0, 0, n_canaries=10) == 0.0


@pytest.mark.parametrize("delta", [0.0, 1e-3])
def test_bound_is_monotone_in_correct_guesses(delta: float) -> None:
    bounds = [epsilon_lower_bound(60, v, n_canaries=100, delta=delta) for v in range(61)]
    assert np.all(np.diff(bounds) >= 0)
    assert bounds[30] == 0.0 < bounds[-1]


def test_delta_and_canary_count_weaken_the_bound() -> None:
    """delta is paid 2 m times: a larger delta, or more canaries at one delta, proves less."""
    pure = epsilon_lower_bound(200, 195, n_canaries=500)
    small = epsilon_lower_bound(200, 195, n_canaries=500, delta=1e-5)
    large = epsilon_lower_bound(200, 195, n_canaries=500, delta=1e-3)
    more = epsilon_lower_bound(200, 195, n_canaries=5000, delta=1e-3)
    assert pure > small > large > more


def test_higher_confidence_weakens_the_bound() -> None:
    at_95 = epsilon_lower_bound(100, 95, n_canaries=1000)
    assert epsilon_lower_bound(100, 95, n_canaries=1000, confidence=0.99) < at_95


def test_p_value_by_hand() -> None:
    """r = 2, v = 2 at eps = 0: f(2) = 1/4, max((f(1) - f(2))/1, (f(0) - f(2))/2) = 1/2."""
    assert p_value(2, 2, n_canaries=10, epsilon=0.0) == pytest.approx(0.25)
    assert p_value(2, 2, n_canaries=10, epsilon=0.0, delta=0.01) == pytest.approx(0.35)
    assert p_value(2, 2, n_canaries=1000, epsilon=0.0, delta=0.01) == 1.0


@pytest.mark.parametrize("delta", [0.0, 1e-3])
@pytest.mark.parametrize("epsilon", [0.0, 1.0, 2.0])
def test_bound_exceeds_the_truth_at_most_five_percent_of_the_time(epsilon, delta) -> None:
    """Validity, computed exactly: under randomised response, the tightest pure eps-DP
    guesser, each of r guesses is right w.p. e^eps / (1 + e^eps) independently. The bound
    grows with the right guesses, so it exceeds eps exactly from some count v* on."""
    r = 200
    lo, hi = 0, r + 1  # bisect for v* = the fewest right guesses whose bound exceeds eps
    while lo < hi:
        mid = (lo + hi) // 2
        if epsilon_lower_bound(r, mid, n_canaries=r, delta=delta) > epsilon:
            hi = mid
        else:
            lo = mid + 1
    assert lo <= r  # all right does refute eps: the check below is not vacuous
    assert binom.sf(lo - 1, r, expit(epsilon)) <= 0.05


def test_audit_counts_guesses_on_the_extremes() -> None:
    """Top 2 guessed in, bottom 2 out, the middle abstained on; ties broken by index."""
    scores = np.array([5.0, 1.0, 4.0, 0.0, 3.0, 2.0])
    included = np.array([True, True, False, False, True, True])
    result = audit(scores, included, k_pos=2, k_neg=2)
    # in: canaries 0 (right) and 2 (wrong); out: canaries 1 (wrong) and 3 (right)
    assert (result.n_guesses, result.n_correct, result.n_canaries) == (4, 2, 6)
    assert result.epsilon_lower_bound == 0.0


def test_audit_of_a_perfect_score() -> None:
    included = insert_canaries(1000, np.random.default_rng(0))
    result = audit(included.astype(float), included, k_pos=50, k_neg=50, delta=1e-6)
    assert result == AuditResult(
        epsilon_lower_bound(100, 100, n_canaries=1000, delta=1e-6), 100, 100, 1000
    )


def test_audit_of_randomised_response_is_valid_and_has_power() -> None:
    """1-DP randomised response on the inclusion bits: the bound lands in (0, 1]."""
    rng = np.random.default_rng(3)
    included = insert_canaries(2000, rng)
    flipped = rng.random(2000) < 1 / (1 + math.e)
    scores = (included ^ flipped) + 0.1 * rng.random(2000)  # jitter: no ties
    bound = audit(scores, included, k_pos=500, k_neg=500).epsilon_lower_bound
    assert 0.0 < bound <= 1.0


def test_insert_canaries_flips_fair_independent_coins() -> None:
    mask = insert_canaries(10_000, np.random.default_rng(0))
    assert mask.dtype == np.bool_ and mask.shape == (10_000,)
    assert abs(mask.mean() - 0.5) < 0.02
    again = insert_canaries(10_000, np.random.default_rng(0))
    np.testing.assert_array_equal(mask, again)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((10, 11), {"n_canaries": 20}),  # more right than guessed
        ((30, 10), {"n_canaries": 20}),  # more guesses than canaries
        ((-1, 0), {"n_canaries": 20}),
        ((10.0, 5), {"n_canaries": 20}),
        ((10, 5), {"n_canaries": 20, "delta": 1.0}),
        ((10, 5), {"n_canaries": 20, "delta": -0.1}),
        ((10, 5), {"n_canaries": 20, "confidence": 1.0}),
        ((10, 5), {"n_canaries": 20, "confidence": 0.0}),
    ],
)
def test_epsilon_lower_bound_rejects_bad_input(args, kwargs) -> None:
    with pytest.raises(ValueError):
        epsilon_lower_bound(*args, **kwargs)


def test_p_value_rejects_a_bad_epsilon() -> None:
    with pytest.raises(ValueError, match="epsilon"):
        p_value(10, 5, n_canaries=20, epsilon=-1.0)


@pytest.mark.parametrize(
    ("scores", "included", "k_pos", "k_neg"),
    [
        (np.zeros(4), np.ones(4, dtype=bool), 3, 2),  # k_pos + k_neg > m
        (np.zeros(4), np.ones(4, dtype=bool), -1, 2),
        (np.zeros(4), np.ones(3, dtype=bool), 1, 1),  # shapes differ
        (np.zeros(4), np.ones(4), 1, 1),  # not a boolean mask
        (np.array([0.0, np.nan, 1.0, 2.0]), np.ones(4, dtype=bool), 1, 1),
        (np.zeros((2, 2)), np.ones((2, 2), dtype=bool), 1, 1),
    ],
)
def test_audit_rejects_bad_input(scores, included, k_pos, k_neg) -> None:
    with pytest.raises(ValueError):
        audit(scores, included, k_pos=k_pos, k_neg=k_neg)


@pytest.mark.parametrize("n", [0, -3, 2.5, True])
def test_insert_canaries_rejects_a_bad_count(n) -> None:
    with pytest.raises(ValueError):
        insert_canaries(n, np.random.default_rng(0))
