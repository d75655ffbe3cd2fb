"""A fit that spends from the private dataset's lifetime budget, for the CLI and the pipeline.

Every fit on the same private data adds noise anew, so it is new spending; across runs the
spends add up (basic composition). :func:`budgeted_fit` checks the dataset's lifetime budget
before any record is read by a mechanism, fits, and records what the fit spent, all under the
dataset's lock so two scheduled runs cannot spend at once. A refusal for size spends the count
that decided it, and that is recorded too.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpprefsyn.errors import DatasetTooSmallError
from dpprefsyn.privacy.budget_store import BudgetStore
from dpprefsyn.private.config import FitConfig
from dpprefsyn.private.fingerprint import dataset_fingerprint, load_or_create_key
from dpprefsyn.private.fit import fit_preference_model

if TYPE_CHECKING:
    from dpprefsyn.artifact import PreferenceModel
    from dpprefsyn.loaders import PreferenceData


def data_fingerprint(data: PreferenceData, state_dir: str | Path) -> str:
    """Keyed fingerprint of the private table; the key stays in ``state_dir``."""
    return dataset_fingerprint(data.table, load_or_create_key(state_dir))


def budgeted_fit(
    data: PreferenceData,
    config: FitConfig,
    *,
    state_dir: str | Path,
    fingerprint: str,
    lifetime_epsilon: float,
    lifetime_delta: float | None = None,
    lock_timeout: float = 0.0,
    run: str,
    **fit_kwargs: Any,
) -> PreferenceModel:
    """:func:`fit_preference_model` within the dataset's lifetime budget.

    Raises
    ------
    BudgetError
        The fit would exceed the lifetime budget; nothing was read or spent.
    BudgetLockedError
        Another run holds the dataset's lock past ``lock_timeout`` seconds.
    DatasetTooSmallError
        The data are too small for ``config.epsilon``; what the decision spent is recorded.
    """
    store = BudgetStore(Path(state_dir) / "budgets")
    with store.lock(fingerprint, timeout=lock_timeout):
        store.check(
            fingerprint,
            epsilon=config.epsilon,
            delta=config.delta or 0.0,
            lifetime_epsilon=lifetime_epsilon,
            lifetime_delta=lifetime_delta,
        )
        try:
            model = fit_preference_model(data, config, **fit_kwargs)
        except DatasetTooSmallError as err:
            store.record(
                fingerprint,
                epsilon=err.spent_epsilon,
                delta=err.spent_delta,
                run=f"{run} (refused: dataset too small)",
            )
            raise
        total = model.privacy_report["total"]
        store.record(fingerprint, epsilon=total["epsilon"], delta=total["delta"], run=run)
    model.privacy_report["private_data_fingerprint"] = fingerprint
    return model


def lifetime_spent(state_dir: str | Path, fingerprint: str) -> tuple[float, float]:
    """(epsilon, delta) spent on the dataset so far, over every recorded run."""
    return BudgetStore(Path(state_dir) / "budgets").spent(fingerprint)
