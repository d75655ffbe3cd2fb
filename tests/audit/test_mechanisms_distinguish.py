"""Distinguishing audits of each mechanism we run or wrap, and of a broken variant of each.

Every audit runs a mechanism many times on neighbouring datasets ``D`` and ``D'`` (one record
added; for PrivDPO one label flipped), reduces each output to a scalar statistic that the extra
record moves, and asks :func:`~dpprefsyn.audit.distinguish.distinguish` whether the runs refute
the claimed ``(epsilon, delta)``. Each mechanism has a pair of tests with the *same* audit
(datasets, statistic, runs, confidence): ours must pass, and a deliberately broken variant
(noise off, noise miscalibrated, a data-dependent parameter) must be caught. An audit that
cannot fail proves nothing; one that catches the broken variant shows the runs suffice to see
a violation of that size. A bound below the claim on ours is not a proof of privacy: Gaussian
mechanisms are far from tight at probabilities a few thousand runs can measure.

The neighbouring datasets are chosen so that the broken variants' outputs are deterministic
and differ (no eigenvalue or assignment ties), which makes "caught" a certainty rather than
luck; the runs are then sized so that the noisy variants are caught with margin too.

Two tests guard bugs these audits found and that are fixed: diffprivlib's k-means overspent
its budget, and PrivDPO's output differed between the labels in its last bit. Pure functions
that cost time but
release nothing are memoised, and DP-SGD's noise calibration is replaced by a constant (its
output is not the statistic audited): each fixture says why.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

import dpprefsyn.dp.cluster as cluster_module
import dpprefsyn.dp.histogram as histogram_module
import dpprefsyn.dp.pca as pca_module
import dpprefsyn.dp.reward as reward_module
import dpprefsyn.private.fit as fit_module
import dpprefsyn.train.privdpo as privdpo
from dpprefsyn.audit.distinguish import DistinguishResult, distinguish
from dpprefsyn.dp import DPPCA, DiffprivlibKMeans, DPHistogram, DPSGDReward, DPSphericalKMeans
from dpprefsyn.dp.cluster import su_iterations
from dpprefsyn.dp.histogram import dp_count
from dpprefsyn.privacy import PrivacyLedger, analysis
from dpprefsyn.private.config import FitConfig

CONFIDENCE = 0.99
EPS, DELTA = 1.0, 1e-5

Statistic = Callable[[object, np.random.Generator], float]


@pytest.fixture(autouse=True)
def fast_calibration(monkeypatch):
    """Memoise ``gaussian_delta``, a pure function: every fit calibrates the same mu again.

    Each estimator solves for its noise with ``brentq`` on ``gaussian_delta`` (about 10 ms on
    a loaded CPU); the same arguments come back every run, so caching changes no output and
    makes a run cost the mechanism's own arithmetic.
    """
    monkeypatch.setattr(analysis, "gaussian_delta", functools.cache(analysis.gaussian_delta))


def audit(
    statistic: Statistic,
    d: object,
    d_prime: object,
    runs: int,
    *,
    delta: float,
    seed: int = 0,
) -> DistinguishResult:
    """``runs`` runs of ``statistic`` on each dataset (half select, half judge)."""
    rng = np.random.default_rng(seed)
    first = np.array([statistic(d, rng) for _ in range(runs)])
    second = np.array([statistic(d_prime, rng) for _ in range(runs)])
    return distinguish(first, second, delta=delta, confidence=CONFIDENCE)


def scale_mu(monkeypatch, module, factor: float) -> None:
    """Break a Gaussian mechanism at its seam: noise std divided by ``factor`` (inf: no noise)."""
    true_mu = module.gaussian_mu
    monkeypatch.setattr(module, "gaussian_mu", lambda eps, delta: factor * true_mu(eps, delta))


def assert_passes(result: DistinguishResult, epsilon: float, delta: float) -> None:
    assert not result.violates(epsilon, delta), result.summary()


def assert_caught(result: DistinguishResult, epsilon: float, delta: float) -> None:
    assert result.violates(epsilon, delta), f"broken variant not caught: {result.summary()}"


# --- Gaussian estimators: DPHistogram, DPPCA, DPSphericalKMeans ---------------------------

# Histogram: the extra record falls in bin 0; the statistic is that bin's noisy count.
LABELS = np.array([0] * 5 + [1] * 3)

# PCA: X^T X = diag(2, 1.5, 0), whose top direction is e1. The extra record e2 makes it
# diag(2, 2.5, 0), whose top direction is e2. Distinct eigenvalues on both sides, so the
# exact output is deterministic and differs (|<c1, e2>| = 0 against 1).
PCA_X = np.array([[1.0, 0, 0], [1.0, 0, 0], [0, 1.0, 0], [0, math.sqrt(0.5), 0]])

# k-means: five rows on e1 and one cluster. The exact centre is e1 on D and
# normalize(5 e1 + e2) on D', whatever the random start (every row joins the only centre).
EXTRA = np.array([0.0, 1.0, 0.0])
KM_X = np.tile([1.0, 0.0, 0.0], (5, 1))


def histogram_count(labels: np.ndarray, rng: np.random.Generator) -> float:
    """The noisy count of the bin that the extra record falls into."""
    return DPHistogram(2, epsilon=EPS, delta=DELTA, random_state=rng).fit(labels).counts_[0]


def pca_alignment(X: np.ndarray, rng: np.random.Generator) -> float:
    """|cos| of the first released component with the extra record's direction."""
    pca = DPPCA(1, epsilon=EPS, delta=DELTA, row_norm_bound=1.0, random_state=rng).fit(X)
    return abs(float(pca.components_[0, 1]))


def centre_alignment(X: np.ndarray, rng: np.random.Generator) -> float:
    """Largest cosine of a released centre with the extra record."""
    km = DPSphericalKMeans(1, epsilon=EPS, delta=DELTA, random_state=rng).fit(X)
    return float((km.cluster_centers_ @ EXTRA).max())


# name: (statistic, D, D', runs, module whose gaussian_mu sets the noise)
GAUSSIAN = {
    "histogram": (histogram_count, LABELS, np.append(LABELS, 0), 4000, histogram_module),
    "pca": (pca_alignment, PCA_X, np.vstack([PCA_X, EXTRA]), 500, pca_module),
    "spherical-kmeans": (centre_alignment, KM_X, np.vstack([KM_X, EXTRA]), 500, cluster_module),
}


def audit_gaussian(name: str) -> DistinguishResult:
    statistic, d, d_prime, runs, _ = GAUSSIAN[name]
    return audit(statistic, d, d_prime, runs, delta=DELTA)


@pytest.mark.parametrize("name", GAUSSIAN)
def test_gaussian_estimator_passes(name):
    assert_passes(audit_gaussian(name), EPS, DELTA)


@pytest.mark.parametrize(
    ("name", "factor"),
    [
        ("histogram", math.inf),
        ("histogram", 4.0),
        ("pca", math.inf),
        ("spherical-kmeans", math.inf),
    ],
    ids=["histogram-exact", "histogram-noise-std-over-4", "pca-exact", "spherical-kmeans-exact"],
)
def test_gaussian_estimator_broken_is_caught(monkeypatch, name, factor):
    """Noise off, and (histogram) noise 4x too small, as from a wrong sensitivity or mu."""
    scale_mu(monkeypatch, GAUSSIAN[name][4], factor)
    assert_caught(audit_gaussian(name), EPS, DELTA)


# --- dp_count (Laplace, pure DP) -----------------------------------------------------------

COUNT_RUNS = 20_000


class _ScaledLaplace:
    """A generator whose Laplace noise is ``factor`` times too small: the bug under test."""

    def __init__(self, rng: np.random.Generator, factor: float) -> None:
        self.rng, self.factor = rng, factor

    def laplace(self, loc: float, scale: float, size: int | None = None) -> float:
        return self.rng.laplace(loc, scale / self.factor, size)


def count_statistic(factor: float) -> Statistic:
    def statistic(n: object, rng: np.random.Generator) -> float:
        source = rng if factor == 1.0 else _ScaledLaplace(rng, factor)
        return dp_count(int(n), epsilon=EPS, rng=source)[0]

    return statistic


def test_dp_count_passes_and_is_nearly_tight():
    """Laplace is tight at every threshold past the shift: the bound comes close to eps."""
    result = audit(count_statistic(1.0), 10, 11, COUNT_RUNS, delta=0.0)
    assert_passes(result, EPS, 0.0)
    assert result.epsilon_lower_bound > 0.8 * EPS, result.summary()


@pytest.mark.parametrize("factor", [2.0, math.inf], ids=["half-scale", "exact"])
def test_dp_count_broken_is_caught(factor):
    result = audit(count_statistic(factor), 10, 11, COUNT_RUNS, delta=0.0)
    assert_caught(result, EPS, 0.0)


# --- DiffprivlibKMeans ---------------------------------------------------------------------

# One feature, one cluster: four rows at -0.4, the extra one at +0.5 moves the centre to -0.22.
DPL_X = np.full((4, 1), -0.4)
DPL_X_PRIME = np.vstack([DPL_X, [[0.5]]])
DPL_RUNS = 100


def diffprivlib_centre(X: np.ndarray, rng: np.random.Generator) -> float:
    km = DiffprivlibKMeans(1, epsilon=EPS, n_iter=2, random_state=int(rng.integers(2**31)))
    return float(km.fit(X).cluster_centers_[0, 0])


def test_diffprivlib_kmeans_passes():
    result = audit(diffprivlib_centre, DPL_X, DPL_X_PRIME, DPL_RUNS, delta=0.0)
    assert_passes(result, EPS, 0.0)


def test_diffprivlib_kmeans_with_epsilon_mispassed_is_caught(monkeypatch):
    """The wrapper handing diffprivlib 1000x its epsilon (the ledger still records EPS)."""
    from diffprivlib.models import KMeans

    fit = KMeans.fit

    def leaky_fit(self, X, y=None, sample_weight=None):
        self.epsilon *= 1000
        return fit(self, X)

    monkeypatch.setattr(KMeans, "fit", leaky_fit)
    result = audit(diffprivlib_centre, DPL_X, DPL_X_PRIME, DPL_RUNS, delta=0.0)
    assert_caught(result, EPS, 0.0)


@pytest.fixture
def mechanism_epsilons(monkeypatch) -> dict[str, list[float]]:
    """The epsilon of every mechanism diffprivlib's k-means creates: counts, then sums."""
    from diffprivlib.mechanisms import GeometricFolded, LaplaceBoundedDomain

    spent: dict[str, list[float]] = {"count": [], "sum": []}
    for mechanism, key in ((GeometricFolded, "count"), (LaplaceBoundedDomain, "sum")):

        def record(self, *args, _init=mechanism.__init__, _key=key, **kwargs):
            spent[_key].append(kwargs["epsilon"])
            _init(self, *args, **kwargs)

        monkeypatch.setattr(mechanism, "__init__", record)
    return spent


@pytest.mark.parametrize("d", [2, 20, 64])
def test_diffprivlib_kmeans_spends_at_most_its_epsilon(mechanism_epsilons, d):
    """Add up the epsilons diffprivlib hands its mechanisms (an audit by bookkeeping).

    Past a few dimensions the sampling test has no power (pure DP composed over d
    coordinates is far from tight at measurable probabilities), so the mechanisms' own
    parameters are read instead: per iteration, clusters are disjoint, so one iteration
    costs one count's epsilon plus ``d`` coordinate sums'. d = 20 is the research preset
    (DP-PCA to 20 dimensions, then this k-means), where diffprivlib 0.6.6 alone spent 1.52x.
    """
    k, n_iter = 3, 2
    ledger = PrivacyLedger(epsilon=2.0, delta=DELTA)
    X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(300, d))
    km = DiffprivlibKMeans(k, epsilon=1.0, n_iter=n_iter, random_state=0, ledger=ledger).fit(X)
    counts, sums = mechanism_epsilons["count"], mechanism_epsilons["sum"]
    assert len(counts) == km.n_iter_ == n_iter and len(sums) == n_iter * k * d
    # One record: one count and one cluster's d sums (1/k of all sums) per iteration.
    assert sum(counts) + sum(sums) / k <= ledger.total() * (1 + 1e-12)
    assert counts[0] / sums[0] == pytest.approx(np.cbrt(4 * d * 0.225**2))  # Su et al.'s split


def test_diffprivlib_kmeans_noises_empty_clusters(mechanism_epsilons):
    """Every cluster's count and sums are noised each iteration, rows or none.

    An unnoised empty cluster would keep its centre exactly, while one row would make it a
    noisy mean: the output would show whether the cluster is empty.
    """
    X = np.full((20, 2), -0.4)  # all rows join one centre; the others stay empty
    km = DiffprivlibKMeans(4, epsilon=1.0, n_iter=3, random_state=0).fit(X)
    assert len(np.unique(km.labels_)) == 1
    assert len(mechanism_epsilons["count"]) == 3 and len(mechanism_epsilons["sum"]) == 3 * 4 * 2


def test_diffprivlib_kmeans_iterations_do_not_depend_on_the_exact_size():
    """At a size where diffprivlib's rule on the exact n steps (134 -> 135 rows: 2 -> 3
    iterations), n and n + 1 rows with the same noisy count run the same iterations.
    """
    from diffprivlib.models import KMeans

    n, noisy = 134, 140.0
    exact_rule = KMeans(1, epsilon=1.0)._calc_iters
    assert exact_rule(1, n) != exact_rule(1, n + 1)
    X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(n + 1, 1))
    iters = {
        DiffprivlibKMeans(1, epsilon=1.0, random_state=0).fit(rows, noisy_n_samples=noisy).n_iter_
        for rows in (X[:n], X)
    }
    assert iters == {su_iterations(1.0, 1, 1, noisy)}


def test_su_iterations_is_diffprivlibs_rule():
    from diffprivlib.models import KMeans

    for k, d, n in [(1, 1, 134), (1, 1, 135), (5, 20, 60_000), (5, 20, 200_000), (3, 64, 10**7)]:
        assert su_iterations(0.5, k, d, n) == KMeans(k, epsilon=0.5)._calc_iters(d, n)


# --- PrivDPO weight (label DP) -------------------------------------------------------------

BETA, H = 0.1, 1.7  # DPO temperature, and the pair's DPO logit when ``a`` is preferred
PRIVDPO_RUNS = 20_000


def privdpo_coefficients(
    loss: str, seed: int, *, epsilon: float = EPS
) -> tuple[np.ndarray, np.ndarray]:
    """The released gradient coefficient on the label-free direction ``v_ab``, many runs.

    Under ``D`` (``a`` preferred) the trainer's per-example gradient is ``dL/dh`` at ``h``;
    under ``D'`` (label flipped) the logit is ``-h`` and the same direction's coefficient is
    ``-dL/dh``. One batch of identical pairs draws one coin per example: one run each.
    Unrounded: an output that differs between the labels in any bit gives the label away.
    """
    gen = torch.Generator().manual_seed(seed)
    out = []
    for sign in (1.0, -1.0):
        h = torch.full((PRIVDPO_RUNS,), sign * H, dtype=torch.float64, requires_grad=True)
        loss_value = privdpo.private_dpo_loss(
            h, beta=BETA, loss=loss, epsilon=epsilon, generator=gen
        ).loss
        (grad,) = torch.autograd.grad(loss_value.sum(), h)
        out.append(sign * grad.numpy())
    return out[0], out[1]


def test_privdpo_passes_and_is_nearly_tight():
    """Randomised response is tight: the two outputs' probabilities are e^eps apart."""
    result = distinguish(*privdpo_coefficients("privdpo", 0), confidence=CONFIDENCE)
    assert_passes(result, EPS, 0.0)
    assert result.epsilon_lower_bound > 0.85 * EPS, result.summary()


def test_privdpo_with_unit_weight_is_caught():
    """w = 1 is plain DPO: the gradient's sign gives the label away."""
    result = distinguish(*privdpo_coefficients("dpo", 0), confidence=CONFIDENCE)
    assert_caught(result, EPS, 0.0)


def test_privdpo_with_wrong_keep_probability_is_caught(monkeypatch):
    """Coins that keep the label with probability e^2eps/(e^2eps + 1) while claiming eps."""
    keep = privdpo.keep_probability
    monkeypatch.setattr(privdpo, "keep_probability", lambda eps: keep(2 * eps))
    result = distinguish(*privdpo_coefficients("privdpo", 0), confidence=CONFIDENCE)
    assert_caught(result, EPS, 0.0)


def test_privdpo_coefficient_is_label_free_to_the_last_bit():
    """Mironov 2012's floating-point attack, in miniature: at eps = 0.5 the coefficient kept
    under one label and flipped under the other used to differ in the last bit
    (sigmoid(-x) != 1 - sigmoid(x) in floats), which gave the label away with certainty.
    """
    eps = 0.5
    first, second = privdpo_coefficients("privdpo", 0, epsilon=eps)
    result = distinguish(first, second, confidence=CONFIDENCE)
    assert not result.violates(eps), result.summary()


# --- The whole private fit -----------------------------------------------------------------

# D has 40 records, D' one more. delta is fixed: by default it comes from a Laplace count
# (audited above as dp_count), which would make every run calibrate different noise.
FIT_EPS, FIT_DELTA = 2.0, 1e-3
FIT_RUNS = 150


def fit_datasets(n: int, d: int = 4) -> tuple[tuple, tuple]:
    rng = np.random.default_rng(42)
    chosen, rejected = rng.normal(size=(n + 1, d)), rng.normal(size=(n + 1, d))
    return (chosen[:n], rejected[:n]), (chosen, rejected)


def released(config: dict, read: Callable[[dict], float]) -> Statistic:
    """Run the fit with a fresh insecure seed and read one value of its privacy report."""

    def statistic(data: tuple, rng: np.random.Generator) -> float:
        cfg = FitConfig(
            epsilon=FIT_EPS, delta=FIT_DELTA, insecure_seed=int(rng.integers(2**63)), **config
        )
        return read(fit_module.fit_from_embeddings(*data, cfg).privacy_report)

    return statistic


@pytest.fixture
def quiet_fit(monkeypatch):
    """Skip per-run costs that release nothing: library versions and the no-projection log."""
    monkeypatch.setattr(fit_module, "_versions", functools.cache(fit_module._versions))
    logger = logging.getLogger(fit_module.__name__)
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def noisy_count(report: dict) -> float:
    return report["noisy_cluster_counts"][0]


class ExactHistogram(DPHistogram):
    """The bug: exact counts released while the ledger records a Gaussian release."""

    def fit(self, labels: np.ndarray, y: None = None) -> ExactHistogram:
        super().fit(labels)
        self.counts_ = np.bincount(labels, minlength=self.n_bins).astype(float)
        return self


@pytest.mark.usefixtures("quiet_fit")
def test_fit_report_passes():
    d, d_prime = fit_datasets(40)
    result = audit(released({}, noisy_count), d, d_prime, FIT_RUNS, delta=FIT_DELTA)
    assert_passes(result, FIT_EPS, FIT_DELTA)


@pytest.mark.usefixtures("quiet_fit")
def test_fit_report_with_exact_histogram_is_caught(monkeypatch):
    monkeypatch.setattr(fit_module, "DPHistogram", ExactHistogram)
    d, d_prime = fit_datasets(40)
    result = audit(released({}, noisy_count), d, d_prime, FIT_RUNS, delta=FIT_DELTA)
    assert_caught(result, FIT_EPS, FIT_DELTA)


# DP-SGD's released plan. The calibration of the noise multiplier costs ~13 s a fit, so
# it is replaced by a constant: the statistic (the released sampling rate) does not depend
# on it, and the rate's own path (noisy histogram -> rate -> report) runs unchanged. The
# histogram gets half the budget (default: 1/10 of these two stages) so that the noisy count
# of 40 records stays positive and the fit never refuses to run.
SGD_CONFIG = {"reward": "dp-sgd", "budget_split": {"histogram": 0.5, "reward": 0.5}}


@pytest.fixture
def constant_accountant(monkeypatch):
    monkeypatch.setattr(reward_module, "calibrate_subsampled_gaussian", lambda *a: 1.0)
    monkeypatch.setattr(reward_module, "subsampled_gaussian_epsilon", lambda *a: 0.0)


def sample_rate(report: dict) -> float:
    (rate,) = (
        r["params"]["sample_rate"]
        for r in report["releases"]
        if r["mechanism"] == "subsampled_gaussian"
    )
    return rate


class ExactCountSGD(DPSGDReward):
    """The bug: sampling rate and steps computed from the exact cluster sizes."""

    def fit(self, z: np.ndarray, groups: np.ndarray, noisy_counts: np.ndarray) -> ExactCountSGD:
        exact = np.bincount(np.asarray(groups), minlength=len(noisy_counts)).astype(float)
        return super().fit(z, groups, exact)


@pytest.mark.usefixtures("quiet_fit", "constant_accountant")
def test_fit_dp_sgd_sampling_rate_passes():
    d, d_prime = fit_datasets(40)
    result = audit(released(SGD_CONFIG, sample_rate), d, d_prime, FIT_RUNS, delta=FIT_DELTA)
    assert_passes(result, FIT_EPS, FIT_DELTA)


@pytest.mark.usefixtures("quiet_fit", "constant_accountant")
def test_fit_dp_sgd_with_data_dependent_sampling_rate_is_caught(monkeypatch):
    monkeypatch.setattr(fit_module, "DPSGDReward", ExactCountSGD)
    d, d_prime = fit_datasets(40)
    result = audit(released(SGD_CONFIG, sample_rate), d, d_prime, FIT_RUNS, delta=FIT_DELTA)
    assert_caught(result, FIT_EPS, FIT_DELTA)
