"""The privacy ledger: every DP release of a run, its budget, and the composed guarantee."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from dpprefsyn.errors import BudgetError
from dpprefsyn.privacy.analysis import gaussian_epsilon, gaussian_mu
from dpprefsyn.privacy.releases import Release

NEIGHBOURING_RELATION = (
    "add/remove one preference record: two private datasets are neighbours when one equals "
    "the other with one (prompt, chosen, rejected) record added or removed"
)

COMPOSITION_RULE = (
    "Gaussian releases compose as GDP (mu = sqrt(sum mu_i^2), valid under fully adaptive "
    "choice of noise); the GDP total is converted to (epsilon, delta) exactly; pure-DP and "
    "DP-SGD releases add their fixed (epsilon, delta) shares by basic composition; releases on "
    "disjoint clusters compose in parallel (a group costs its most expensive member)."
)


class PrivacyLedger:
    """Budget and record of every DP release in one run, passed explicitly to each stage.

    Parameters
    ----------
    epsilon : float
        Total budget for the run.
    delta : float
        Total delta of the run's guarantee. All Gaussian releases share what the DP-SGD
        releases leave of it.

    Attributes
    ----------
    history : list of Release
        Releases in the order they were spent.

    Notes
    -----
    One neighbouring relation holds for the whole pipeline (:data:`NEIGHBOURING_RELATION`),
    the one opacus and the PRV accountant assume, and every stage states its sensitivity
    under it.
    """

    def __init__(self, *, epsilon: float, delta: float) -> None:
        if not (epsilon > 0):
            raise ValueError(f"epsilon budget must be positive, got {epsilon}")
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.history: list[Release] = []

    def __len__(self) -> int:
        return len(self.history)

    # --- composition -------------------------------------------------------------------

    @staticmethod
    def _costs(releases: list[Release]) -> tuple[float, float, float]:
        """Return (GDP mu, epsilon of the rest, delta of the rest), parallel groups at their max."""
        by_group: dict[str | None, list[Release]] = defaultdict(list)
        for r in releases:
            by_group[r.group].append(r)
        mu_sq, eps_other, delta_other = 0.0, 0.0, 0.0
        for group, members in by_group.items():
            # Within a parallel group, each record pays for one member only.
            units = [[m] for m in members] if group is not None else [members]
            costs = [
                (
                    sum(m.mu**2 for m in u if m.mechanism == "gaussian"),
                    sum(m.epsilon for m in u if m.mechanism != "gaussian"),
                    sum(m.delta for m in u if m.mechanism != "gaussian"),
                )
                for u in units
            ]
            mu_sq += max(c[0] for c in costs)
            eps_other += max(c[1] for c in costs)
            delta_other += max(c[2] for c in costs)
        return math.sqrt(mu_sq), eps_other, delta_other

    @classmethod
    def _compose(cls, releases: list[Release], delta: float) -> tuple[float, float, float]:
        """Return (epsilon, delta_gdp, mu) of ``releases`` at total ``delta``."""
        mu, eps_other, delta_other = cls._costs(releases)
        delta_gdp = delta - delta_other
        if mu == 0:
            return eps_other, 0.0, 0.0
        if delta_gdp <= 0:
            return math.inf, delta_gdp, mu
        return eps_other + gaussian_epsilon(mu, delta_gdp), delta_gdp, mu

    def total(self) -> float:
        """Epsilon of everything spent so far, at the ledger's delta."""
        return self._compose(self.history, self.delta)[0]

    def remaining(self) -> float:
        return max(0.0, self.epsilon - self.total())

    def check(self, *releases: Release) -> None:
        """Raise :class:`BudgetError` if spending ``releases`` would exceed the budget."""
        after = self._compose(self.history + list(releases), self.delta)[0]
        if after > self.epsilon * (1 + 1e-6):
            stages = ", ".join(sorted({r.stage for r in releases}))
            raise BudgetError(
                f"releasing {stages} would bring epsilon to {after:.4g}, over the budget "
                f"{self.epsilon:.4g}; remaining() is {self.remaining():.4g}"
            )

    def spend(self, *releases: Release) -> None:
        """Record ``releases`` after :meth:`check` succeeds; nothing is recorded otherwise."""
        self.check(*releases)
        self.history.extend(releases)

    # --- planning ----------------------------------------------------------------------

    def gaussian_mu_available(
        self, reserve_epsilon: float = 0.0, reserve_delta: float = 0.0
    ) -> float:
        """GDP mu left for Gaussian releases after the given non-Gaussian reserves.

        Used to plan noise before data are read: the result depends only on the budget and the
        releases already spent, never on private values.
        """
        mu_spent, eps_other, delta_other = self._costs(self.history)
        eps_left = self.epsilon - eps_other - reserve_epsilon
        delta_left = self.delta - delta_other - reserve_delta
        if eps_left <= 0 or delta_left <= 0:
            return 0.0
        mu_total = gaussian_mu(eps_left, delta_left)
        return math.sqrt(max(0.0, mu_total**2 - mu_spent**2))

    # --- persistence -------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        eps, delta_gdp, mu = self._compose(self.history, self.delta)
        return {
            "neighbouring_relation": NEIGHBOURING_RELATION,
            "composition": COMPOSITION_RULE,
            "budget": {"epsilon": self.epsilon, "delta": self.delta},
            "total": {"epsilon": eps, "delta": self.delta, "gdp_mu": mu},
            "releases": [r.to_dict() for r in self.history],
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> PrivacyLedger:
        if state.get("neighbouring_relation") != NEIGHBOURING_RELATION:
            raise ValueError("ledger was written under another neighbouring relation")
        ledger = cls(epsilon=state["budget"]["epsilon"], delta=state["budget"]["delta"])
        ledger.history = [Release.from_dict(r) for r in state["releases"]]
        return ledger

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.state_dict(), indent=2))

    @classmethod
    def load(cls, path: str | Path) -> PrivacyLedger:
        return cls.from_state_dict(json.loads(Path(path).read_text()))
