"""PrivacyLedger: spending, budget checks, composition rules and persistence."""

from __future__ import annotations

import json
import math

import pytest

from dpprefsyn.errors import BudgetError
from dpprefsyn.privacy import NEIGHBOURING_RELATION, PrivacyLedger, Release
from dpprefsyn.privacy.analysis import gaussian_epsilon, gaussian_mu

DELTA = 1e-5


def pure(eps: float, stage: str = "count", group: str | None = None) -> Release:
    """Laplace (pure) release of ``eps``."""
    return Release(stage, "laplace", epsilon=eps, group=group)


def gauss(mu: float, stage: str = "pca", group: str | None = None) -> Release:
    """Gaussian release of GDP parameter ``mu``."""
    return Release(stage, "gaussian", epsilon=gaussian_epsilon(mu, DELTA), delta=DELTA, mu=mu,
                   group=group)  # fmt: skip


def sgd(eps: float, delta: float, group: str | None = "reward-clusters") -> Release:
    """DP-SGD release carrying a fixed ``(eps, delta)`` share."""
    params = {"noise_multiplier": 1.0, "sample_rate": 0.01, "steps": 100}
    return Release("reward", "subsampled_gaussian", epsilon=eps, delta=delta, group=group,
                   params=params)  # fmt: skip


def test_empty_ledger_costs_nothing() -> None:
    """A new ledger has spent nothing and has its whole budget left."""
    ledger = PrivacyLedger(epsilon=2.0, delta=DELTA)
    assert ledger.total() == 0.0
    assert ledger.remaining() == 2.0
    assert len(ledger) == 0


@pytest.mark.parametrize(("eps", "delta"), [(0.0, 1e-5), (-1.0, 1e-5), (1.0, 0.0), (1.0, 1.0)])
def test_bad_budget_rejected(eps: float, delta: float) -> None:
    """Budgets must have epsilon > 0 and delta in (0, 1)."""
    with pytest.raises(ValueError):
        PrivacyLedger(epsilon=eps, delta=delta)


def test_spend_then_total() -> None:
    """Pure releases add up; history keeps them in order; remaining is what is left."""
    ledger = PrivacyLedger(epsilon=2.0, delta=DELTA)
    ledger.spend(pure(0.3, "a"))
    ledger.spend(pure(0.5, "b"), pure(0.2, "c"))
    assert ledger.total() == pytest.approx(1.0)
    assert ledger.remaining() == pytest.approx(1.0)
    assert [r.stage for r in ledger.history] == ["a", "b", "c"]
    assert len(ledger) == 3


def test_over_budget_raises_and_records_nothing() -> None:
    """``check`` raises BudgetError naming remaining(); spend then leaves the history untouched."""
    ledger = PrivacyLedger(epsilon=1.0, delta=DELTA)
    ledger.spend(pure(0.8, "a"))
    with pytest.raises(BudgetError, match="remaining"):
        ledger.check(pure(0.3, "b"))
    with pytest.raises(BudgetError):
        ledger.spend(pure(0.1, "b"), pure(0.2, "c"))
    assert [r.stage for r in ledger.history] == ["a"]
    assert ledger.total() == pytest.approx(0.8)
    assert issubclass(BudgetError, ValueError)


def test_spend_exactly_the_budget_is_allowed() -> None:
    """Spending exactly epsilon is within budget; a hair more is not."""
    ledger = PrivacyLedger(epsilon=1.0, delta=DELTA)
    ledger.spend(pure(0.4), pure(0.6))
    assert ledger.remaining() == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(BudgetError):
        ledger.spend(pure(1e-3))


def test_parallel_group_costs_max_not_sum() -> None:
    """Releases on disjoint records (one group) cost their most expensive member."""
    ledger = PrivacyLedger(epsilon=1.0, delta=DELTA)
    ledger.spend(pure(0.5, group="g"), pure(0.7, group="g"), pure(0.2, group="g"))
    assert ledger.total() == pytest.approx(0.7)
    # The same releases without a group would be over budget.
    with pytest.raises(BudgetError):
        PrivacyLedger(epsilon=1.0, delta=DELTA).spend(pure(0.5), pure(0.7), pure(0.2))


def test_parallel_gaussian_group_costs_max_mu() -> None:
    """A group of Gaussians costs its largest mu, not the GDP sum of all."""
    ledger = PrivacyLedger(epsilon=50.0, delta=DELTA)
    ledger.spend(gauss(0.5, group="g"), gauss(1.0, group="g"))
    assert ledger.total() == pytest.approx(gaussian_epsilon(1.0, DELTA), rel=1e-9)
    assert ledger.state_dict()["total"]["gdp_mu"] == pytest.approx(1.0)


def test_two_groups_compose_sequentially() -> None:
    """Distinct groups are different stages on the same records: their maxima add up."""
    ledger = PrivacyLedger(epsilon=5.0, delta=DELTA)
    ledger.spend(pure(0.5, group="g1"), pure(0.7, group="g1"))
    ledger.spend(pure(0.1, group="g2"), pure(0.4, group="g2"))
    assert ledger.total() == pytest.approx(1.1)


def test_pure_plus_gaussian_composition() -> None:
    """Pure epsilon adds to the GDP part converted at the ledger's delta."""
    mu = 0.8
    ledger = PrivacyLedger(epsilon=10.0, delta=DELTA)
    ledger.spend(pure(0.25), gauss(mu))
    assert ledger.total() == pytest.approx(0.25 + gaussian_epsilon(mu, DELTA), rel=1e-9)


def test_sgd_delta_is_taken_from_the_gaussian_share() -> None:
    """DP-SGD releases add their (eps, delta) share; the GDP part uses the delta left."""
    mu, total_delta = 0.8, 1e-4
    ledger = PrivacyLedger(epsilon=10.0, delta=total_delta)
    ledger.spend(gauss(mu), sgd(0.5, 4e-5), sgd(0.3, 4e-5))
    expected = 0.5 + gaussian_epsilon(mu, total_delta - 4e-5)
    assert ledger.total() == pytest.approx(expected, rel=1e-9)


def test_sgd_using_all_delta_makes_gaussians_infinite() -> None:
    """When DP-SGD takes the whole delta nothing is left for a Gaussian: epsilon is infinite."""
    ledger = PrivacyLedger(epsilon=100.0, delta=DELTA)
    ledger.spend(sgd(0.5, DELTA))
    with pytest.raises(BudgetError):
        ledger.check(gauss(0.1))
    assert math.isinf(PrivacyLedger._compose([sgd(0.5, DELTA), gauss(0.1)], DELTA)[0])


@pytest.mark.parametrize(("mu1", "mu2"), [(0.3, 0.4), (1.0, 2.0), (0.05, 1.5)])
def test_two_gaussians_compose_as_gdp(mu1: float, mu2: float) -> None:
    """mu1- and mu2-GDP compose to sqrt(mu1^2 + mu2^2)-GDP, cheaper than adding epsilons."""
    ledger = PrivacyLedger(epsilon=100.0, delta=DELTA)
    ledger.spend(gauss(mu1, "a"), gauss(mu2, "b"))
    mu = math.hypot(mu1, mu2)
    assert ledger.state_dict()["total"]["gdp_mu"] == pytest.approx(mu, rel=1e-12)
    assert ledger.total() == pytest.approx(gaussian_epsilon(mu, DELTA), rel=1e-9)
    assert ledger.total() < gaussian_epsilon(mu1, DELTA) + gaussian_epsilon(mu2, DELTA)


def test_state_dict_round_trip(tmp_path) -> None:
    """save/load keeps budget, history and total; the JSON states relation and composition."""
    ledger = PrivacyLedger(epsilon=3.0, delta=DELTA)
    ledger.spend(pure(0.1), gauss(0.5), sgd(0.4, 1e-6), sgd(0.2, 1e-6))
    path = tmp_path / "ledger.json"
    ledger.save(path)
    state = json.loads(path.read_text())
    assert state["neighbouring_relation"] == NEIGHBOURING_RELATION
    assert "GDP" in state["composition"]
    assert state["total"]["epsilon"] == pytest.approx(ledger.total())
    loaded = PrivacyLedger.load(path)
    assert loaded.epsilon == ledger.epsilon and loaded.delta == ledger.delta
    assert loaded.history == ledger.history
    assert loaded.total() == pytest.approx(ledger.total(), rel=1e-12)
    assert loaded.state_dict() == ledger.state_dict()


def test_load_rejects_other_neighbouring_relation(tmp_path) -> None:
    """A ledger written under another neighbouring relation cannot be loaded into this one."""
    ledger = PrivacyLedger(epsilon=1.0, delta=DELTA)
    ledger.spend(pure(0.1))
    state = ledger.state_dict()
    state["neighbouring_relation"] = "replace one record"
    with pytest.raises(ValueError, match="neighbouring relation"):
        PrivacyLedger.from_state_dict(state)
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match="neighbouring relation"):
        PrivacyLedger.load(path)


@pytest.mark.parametrize(
    ("spent", "reserve_eps", "reserve_delta"),
    [([], 0.0, 0.0), ([pure(0.04)], 0.0, 0.0), ([pure(0.04), gauss(0.3)], 0.5, 3e-6)],
)
def test_gaussian_mu_available_leaves_exactly_the_budget(spent, reserve_eps, reserve_delta):
    """Spending the planned mu plus the reserves brings the total to the budget, no more."""
    eps = 2.0
    ledger = PrivacyLedger(epsilon=eps, delta=DELTA)
    ledger.spend(*spent)
    mu = ledger.gaussian_mu_available(reserve_eps, reserve_delta)
    assert mu > 0
    extra = [gauss(mu, "planned")]
    if reserve_eps:
        extra.append(sgd(reserve_eps, reserve_delta))
    ledger.spend(*extra)
    assert ledger.total() == pytest.approx(eps, abs=1e-6)
    with pytest.raises(BudgetError):
        ledger.check(gauss(mu * 0.05, "more"))


def test_gaussian_mu_available_is_zero_when_budget_spent() -> None:
    """Nothing is available once pure releases or reserves use the whole epsilon."""
    ledger = PrivacyLedger(epsilon=1.0, delta=DELTA)
    ledger.spend(pure(1.0))
    assert ledger.gaussian_mu_available() == 0.0
    fresh = PrivacyLedger(epsilon=1.0, delta=DELTA)
    assert fresh.gaussian_mu_available(reserve_epsilon=1.0) == 0.0
    assert fresh.gaussian_mu_available(reserve_delta=DELTA) == 0.0
    assert fresh.gaussian_mu_available() == pytest.approx(gaussian_mu(1.0, DELTA))


def test_gaussian_mu_available_counts_grouped_pure_releases() -> None:
    """The planned mu must be spendable after a parallel group of pure/DP-SGD releases."""
    ledger = PrivacyLedger(epsilon=2.0, delta=1e-4)
    ledger.spend(sgd(1.0, 5e-5), sgd(0.8, 5e-5))
    mu = ledger.gaussian_mu_available()
    ledger.check(gauss(mu, "planned"))


def test_release_validation() -> None:
    """A Gaussian release needs mu > 0; pure epsilons must be finite and non-negative."""
    with pytest.raises(ValueError, match="mu"):
        Release("pca", "gaussian", epsilon=1.0, delta=DELTA, mu=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        Release("count", "laplace", epsilon=-0.1)
    with pytest.raises(ValueError, match="epsilon"):
        Release("count", "pure", epsilon=math.inf)
    with pytest.raises(ValueError, match="delta"):
        Release("count", "pure", epsilon=0.1, delta=1.0)
    r = gauss(0.5)
    assert Release.from_dict(r.to_dict()) == r
