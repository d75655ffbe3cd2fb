"""The distinguishing test's statistics, on mechanisms whose true epsilon is known exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpprefsyn.audit.distinguish import clopper_pearson, distinguish


def laplace_neighbours(scale: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A count of 0 and of 1 with Laplace noise: epsilon is exactly ``1 / scale``."""
    rng = np.random.default_rng(seed)
    return rng.laplace(0.0, scale, n), rng.laplace(1.0, scale, n)


def test_identical_distributions_refute_nothing():
    rng = np.random.default_rng(0)
    result = distinguish(rng.normal(size=20_000), rng.normal(size=20_000))
    assert result.epsilon_lower_bound == 0.0
    assert not result.violates(0.0)


def test_laplace_at_its_epsilon_is_bounded_below_it_and_close():
    eps = 1.0
    result = distinguish(*laplace_neighbours(1 / eps, 40_000, seed=1))
    assert 0.85 < result.epsilon_lower_bound < eps, result.summary()
    assert not result.violates(eps)


def test_laplace_with_half_the_scale_is_caught():
    """Noise for 2 * eps claimed as eps (a sensitivity off by two): refuted, with margin."""
    eps = 1.0
    result = distinguish(*laplace_neighbours(0.5 / eps, 20_000, seed=2))
    assert result.violates(eps), result.summary()
    assert result.epsilon_lower_bound > 1.6


def test_both_directions_are_tested():
    """Swapping D and D' finds the same violation: the bound is over both inequalities."""
    x, y = laplace_neighbours(0.5, 20_000, seed=3)
    forward, backward = distinguish(x, y), distinguish(y, x)
    assert forward.violates(1.0) and backward.violates(1.0)
    assert {e.numerator for e in forward.events} == {"first", "second"}


def test_discrete_statistic_uses_thresholds_between_ties():
    """A two-valued output (randomised response) at ratio e^eps: one threshold, bound < eps."""
    eps, n = 1.0, 40_000
    q = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(4)
    first = (rng.random(n) < q).astype(float)
    second = (rng.random(n) < 1 - q).astype(float)
    result = distinguish(first, second)
    assert {e.threshold for e in result.events} == {0.5}
    assert 0.85 < result.epsilon_lower_bound < eps, result.summary()
    # Twice the ratio is caught.
    q2 = math.exp(2 * eps) / (1 + math.exp(2 * eps))
    caught = distinguish((rng.random(n) < q2).astype(float), (rng.random(n) < 1 - q2) * 1.0)
    assert caught.violates(eps)


def test_deterministic_outputs_are_caught_up_to_what_the_runs_can_show():
    """No noise: P = 1 against P = 0, and the bound is log(n / log(4 / alpha)) at most."""
    n_test, confidence = 100, 0.99
    result = distinguish(np.zeros(2 * n_test), np.ones(2 * n_test), confidence=confidence)
    alpha = (1 - confidence) / 4
    p_lo = alpha ** (1 / n_test)
    expected = math.log(p_lo / (1 - p_lo))
    assert result.epsilon_lower_bound == pytest.approx(expected)
    assert math.log(n_test / math.log(4 / (1 - confidence))) == pytest.approx(expected, rel=0.05)
    assert result.violates(2.0) and not result.violates(expected + 0.01)


def test_delta_absorbs_rare_events():
    """An event of probability 1% against 0 refutes pure DP, but not delta = 0.05."""
    n = 40_000
    rng = np.random.default_rng(5)
    first = np.where(rng.random(n) < 0.01, 10.0, rng.normal(size=n))
    second = rng.normal(size=n)
    assert distinguish(first, second).violates(3.0)
    with_delta = distinguish(first, second, delta=0.05)
    assert with_delta.epsilon_lower_bound == 0.0
    assert not with_delta.violates(3.0)
    assert not with_delta.violates(3.0, delta=0.05)


def test_a_correct_mechanism_is_refuted_at_most_one_minus_confidence_of_the_time():
    """Repeat a small audit of randomised response at its exact ratio: few false alarms."""
    eps, n, reps, confidence = 1.0, 400, 100, 0.9
    q = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(6)
    alarms = sum(
        distinguish(
            (rng.random(n) < q).astype(float),
            (rng.random(n) < 1 - q).astype(float),
            confidence=confidence,
        ).violates(eps)
        for _ in range(reps)
    )
    assert alarms <= (1 - confidence) * reps


def test_clopper_pearson_edges():
    lo, hi = clopper_pearson(np.array([0, 10]), 10, 0.01)
    assert lo[0] == 0.0 and hi[1] == 1.0
    assert hi[0] == pytest.approx(1 - 0.01 ** (1 / 10))  # never 0: ratios stay finite
    assert lo[1] == pytest.approx(0.01 ** (1 / 10))
    lo, hi = clopper_pearson(30, 100, 0.025)
    assert lo < 0.3 < hi


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"first": [1.0], "second": [1.0, 2.0]}, "at least 2 runs"),
        ({"first": [1.0, np.nan], "second": [1.0, 2.0]}, "NaN"),
        ({"confidence": 1.0}, "confidence"),
        ({"delta": 1.0}, "delta"),
        ({"select_fraction": 0.0}, "select_fraction"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, match):
    args = {"first": [0.0, 1.0, 2.0], "second": [0.5, 1.5, 2.5], **kwargs}
    with pytest.raises(ValueError, match=match):
        distinguish(**args)


def test_single_distinct_value_gives_zero():
    result = distinguish(np.ones(50), np.ones(50))
    assert result.epsilon_lower_bound == 0.0 and not result.violates(0.0)
