"""Refuse a dataset too small for its budget, deciding from DP releases only.

At a small epsilon the noise each planned release adds can be larger than anything a few
hundred records could say: the fit would then spend the budget to publish noise, under a
guarantee that looks as good as any other. :func:`check_dataset_size` refuses such a fit
before the releases that would be wasted, with the reason and what to change.

The decision reads only released values (the Laplace count, or the DP histogram of cluster
sizes when ``delta`` is fixed and no count is released) and public settings. It is therefore
post-processing of releases already in the ledger; what they cost is reported with the
refusal so that a lifetime budget can record it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from dpprefsyn.errors import DatasetTooSmallError
from dpprefsyn.privacy import PrivacyLedger
from dpprefsyn.private.config import FitConfig

CONFIDENCE = 0.95
"""A fit goes ahead only when the noisy count shows enough records at this confidence."""

MIN_PER_CLUSTER = 10
"""Records per cluster below which nothing is estimated and ``delta = 1/n~`` exceeds 0.1."""


@dataclass(frozen=True)
class SizeFloor:
    """The fewest records one planned release needs, and why, in words."""

    records: float
    reason: str


@dataclass(frozen=True)
class NoisyCount:
    """A released estimate of the number of records and how far below it the truth may lie."""

    value: float
    margin: float
    source: str

    @classmethod
    def laplace(cls, value: float, epsilon: float) -> NoisyCount:
        """The Laplace count: ``P(noise > t) = exp(-t * epsilon) / 2``."""
        margin = math.log(1.0 / (2.0 * (1.0 - CONFIDENCE))) / epsilon
        return cls(value, margin, f"Laplace count, noise scale {1.0 / epsilon:.3g}")

    @classmethod
    def gaussian(cls, value: float, std: float) -> NoisyCount:
        """The sum of a DP histogram's bins: Gaussian noise of std ``std``."""
        margin = NormalDist().inv_cdf(CONFIDENCE) * std
        return cls(value, margin, f"sum of the noisy cluster sizes, noise std {std:.3g}")


def size_floors(
    cfg: FitConfig,
    *,
    dimension: int,
    reward_noise_std: float | None,
    histogram_noise_std: float,
    pca_noise_std: float | None,
    input_dimension: int,
) -> list[SizeFloor]:
    """The fewest records each planned release needs for its signal to exceed its noise.

    Each floor is a necessary condition, not a sufficient one: even a *unanimous* signal
    (every record pointing the same way) from fewer records is smaller than the noise. Real
    preferences agree far less, so a fit just above the floors is still weak.

    Parameters
    ----------
    cfg : FitConfig
    dimension : int
        Dimension ``p`` of the preference vectors the rewards are fitted on.
    reward_noise_std : float or None
        Noise std per coordinate of a Gaussian reward release; None for DP-SGD.
    histogram_noise_std : float
        Noise std per bin of the cluster histogram.
    pca_noise_std : float or None
        Noise std per entry of DP-PCA's second-moment matrix; None when it does not run.
    input_dimension : int
        Dimension ``d`` of the embeddings DP-PCA reads.

    Returns
    -------
    list of SizeFloor
    """
    k = cfg.k
    per = f" per cluster ({k} clusters)" if k > 1 else ""
    floors = [
        SizeFloor(
            MIN_PER_CLUSTER * k,
            f"at least {MIN_PER_CLUSTER} records{per}: fewer leave nothing to estimate and "
            "delta = 1/n~ above 0.1",
        )
    ]
    signal = min(1.0, cfg.clip)  # a unit preference vector, clipped
    if reward_noise_std is not None:
        noise = reward_noise_std * math.sqrt(dimension)
        floors.append(
            SizeFloor(
                k * noise / signal,
                f"the reward noise{per} has norm about {noise:.3g} ({dimension} dimensions, "
                f"std {reward_noise_std:.3g}), more than the summed preference of fewer "
                "records even if all of them agreed",
            )
        )
    else:
        floors.append(
            SizeFloor(
                2 * k * cfg.batch_size,
                f"DP-SGD needs at least two expected batches of {cfg.batch_size}{per}",
            )
        )
    if k > 1:
        floors.append(
            SizeFloor(
                k * histogram_noise_std,
                f"the noise on each cluster size (std {histogram_noise_std:.3g}) exceeds the "
                f"average size of {k} clusters",
            )
        )
    if pca_noise_std is not None:
        # The spectral norm of a symmetric d x d Gaussian matrix is about 2 std sqrt(d); the
        # second moment of n unit rows has eigenvalues that sum to n.
        noise = 2.0 * pca_noise_std * math.sqrt(input_dimension)
        floors.append(
            SizeFloor(
                noise,
                f"the DP-PCA noise matrix has spectral norm about {noise:.3g}, more than the "
                "top eigenvalue of the second moment of fewer records",
            )
        )
    return floors


def check_dataset_size(
    count: NoisyCount, floors: list[SizeFloor], cfg: FitConfig, ledger: PrivacyLedger
) -> None:
    """Raise :class:`DatasetTooSmallError` unless ``count`` shows enough records for ``floors``.

    The fit goes ahead only when the lower confidence bound ``n~ - margin`` reaches the
    highest floor: the rule trusts the noisy count only as far as its own noise allows, so a
    tiny dataset is refused even when its count's noise happens to be large and positive.

    Privacy
    -------
    Post-processing of ``count`` (a release in ``ledger``) and of public settings; the exact
    number of records is never read. The error carries what ``ledger`` has spent.
    """
    need = max(floors, key=lambda f: f.records)
    lower = count.value - count.margin
    if lower >= need.records:
        return
    raise too_small(
        cfg,
        ledger,
        noisy_count=count.value,
        required=need.records,
        reason=(
            f"its noisy record count is n~={count.value:.0f} ({count.source}), so it may hold "
            f"as few as {max(lower, 0.0):.0f} records ({CONFIDENCE:.0%} confidence), and the "
            f"fit needs at least {math.ceil(need.records)}: {need.reason}"
        ),
    )


def too_small(
    cfg: FitConfig, ledger: PrivacyLedger, *, noisy_count: float, required: float, reason: str
) -> DatasetTooSmallError:
    """Build the refusal: the reason, what to change, and what ``ledger`` has spent."""
    spent_delta = (
        0.0
        if all(r.mechanism != "gaussian" and r.delta == 0 for r in ledger.history)
        else ledger.delta
    )
    spent = ledger.total()
    stages = ", ".join(dict.fromkeys(r.stage for r in ledger.history))
    larger_count = ", or give the count a larger share (count_epsilon_fraction)"
    message = (
        f"the private dataset is too small for epsilon={cfg.epsilon:g}: {reason}. Collect "
        "more records, raise epsilon, or use fewer clusters (n_clusters) or dimensions "
        f"(n_components){larger_count if cfg.delta is None else ''}. Spent on this "
        f"decision: epsilon={spent:.3g}, delta={spent_delta:.3g} ({stages}); no model was "
        "written."
    )
    return DatasetTooSmallError(
        message,
        noisy_count=noisy_count,
        required=required,
        epsilon=cfg.epsilon,
        spent_epsilon=spent,
        spent_delta=spent_delta,
    )
