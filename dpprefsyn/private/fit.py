"""The private fit: private preference pairs in, a DP preference model out."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING

import numpy as np

from dpprefsyn import __version__
from dpprefsyn.artifact import PreferenceModel
from dpprefsyn.dp import (
    DPPCA,
    DiffprivlibKMeans,
    DPHistogram,
    DPMeanReward,
    DPNewtonReward,
    DPSGDReward,
    DPSphericalKMeans,
)
from dpprefsyn.dp._validation import normalize_rows
from dpprefsyn.dp.histogram import dp_count
from dpprefsyn.errors import DataError
from dpprefsyn.privacy import PrivacyLedger, make_rng
from dpprefsyn.privacy.analysis import gaussian_epsilon
from dpprefsyn.private.config import FitConfig
from dpprefsyn.private.size import (
    NoisyCount,
    SizeFloor,
    check_dataset_size,
    size_floors,
    too_small,
)
from dpprefsyn.projection import public_projection

if TYPE_CHECKING:
    from collections.abc import Callable

    from dpprefsyn.embedding import Embedder
    from dpprefsyn.loaders import PreferenceData

log = logging.getLogger(__name__)

_LIBRARIES = (
    "numpy",
    "scikit-learn",
    "diffprivlib",
    "prv-accountant",
    "sentence-transformers",
    "torch",
)


def _versions() -> dict[str, str]:
    out = {"dpprefsyn": __version__}
    for lib in _LIBRARIES:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            out[lib] = "absent"
    return out


def _stage_kinds(cfg: FitConfig, projection: str) -> dict[str, str]:
    """Which stages run, and how each is accounted ("gaussian", "pure" or "sgd")."""
    kinds = {"histogram": "gaussian"}
    if projection == "dp-pca":
        kinds["pca"] = "gaussian"
    if cfg.clustering == "spherical":
        kinds["cluster"] = "gaussian"
    elif cfg.clustering == "diffprivlib":
        kinds["cluster"] = "pure"
    kinds["reward"] = "sgd" if cfg.reward == "dp-sgd" else "gaussian"
    return kinds


IDENTICAL_TOLERANCE = 1e-5
"""Chosen and rejected embeddings closer than this (relative) are one and the same."""


def _checked_embeddings(
    chosen: np.ndarray,
    rejected: np.ndarray,
    record_ids: Sequence[str] | None,
    on_error: str,
) -> np.ndarray:
    """Rows to keep; raise :class:`DataError` on unusable embeddings, naming record and field.

    NaN, infinite or zero vectors mean a broken embedder and are always errors. Chosen and
    rejected embedded identically (texts that differ only in case, spacing or beyond the
    embedder's window) carry no preference: an error, or with ``on_error="drop"`` a drop
    logged with its count. Dropping depends on each record alone, so the guarantee holds.
    """
    if on_error not in ("raise", "drop"):
        raise ValueError(f"on_error must be 'raise' or 'drop', got {on_error!r}")

    def name(i: int) -> str:
        return str(i) if record_ids is None else str(record_ids[i])

    norms = {}
    for field, x in (("chosen", chosen), ("rejected", rejected)):
        bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
        if bad.size:
            raise DataError(name(int(bad[0])), field, "embedding has NaN or infinite values")
        norms[field] = np.linalg.norm(x, axis=1)
        zero = np.flatnonzero(norms[field] == 0)
        if zero.size:
            raise DataError(name(int(zero[0])), field, "embedding is zero")
    gap = np.linalg.norm(chosen - rejected, axis=1)
    same = gap <= IDENTICAL_TOLERANCE * np.maximum(norms["chosen"], norms["rejected"])
    if same.any() and on_error == "raise":
        raise DataError(
            name(int(np.flatnonzero(same)[0])),
            "rejected",
            "chosen and rejected responses embed identically (they differ only in case, "
            "spacing or beyond the embedder's window), so the record states no preference; "
            "drop such records with on_error='drop'",
        )
    if same.any():
        # An exact count, for the operator's console only: never written to an output.
        log.warning(
            "dropped %d record(s) whose chosen and rejected responses embed identically "
            "('identical_embeddings'; exact count, not written to any output)",
            int(same.sum()),
        )
    if same.all():
        raise DataError("<data>", "<file>", "no usable pair: every record embeds identically")
    return ~same


def _plan_floors(
    cfg: FitConfig,
    kinds: dict[str, str],
    stage_mu: Callable[[str], float],
    dimension: int,
    input_dimension: int,
) -> list[SizeFloor]:
    """Size floors of the planned releases, from their noise (public settings only)."""

    def std(stage: str, sensitivity: float) -> float:
        mu = stage_mu(stage)
        return sensitivity / mu if mu > 0 else math.inf

    reward_std = None
    if kinds["reward"] == "gaussian":
        c = cfg.clip
        sensitivity = math.sqrt(c**2 + c**4) if cfg.reward == "dp-newton" else c
        reward_std = std("reward", sensitivity)
    return size_floors(
        cfg,
        dimension=dimension,
        reward_noise_std=reward_std,
        histogram_noise_std=std("histogram", 1.0),
        pca_noise_std=std("pca", 1.0) if "pca" in kinds else None,
        input_dimension=input_dimension,
    )


def fit_from_embeddings(
    chosen: np.ndarray,
    rejected: np.ndarray,
    config: FitConfig | None = None,
    *,
    public_differences: np.ndarray | None = None,
    prompts: np.ndarray | None = None,
    embedder_info: dict | None = None,
    record_ids: Sequence[str] | None = None,
    on_error: str = "raise",
) -> PreferenceModel:
    """Fit the DP preference model from embedded private pairs.

    Parameters
    ----------
    chosen, rejected : ndarray of shape (n, d)
        ``psi(x, a+)`` and ``psi(x, a-)`` of each private record.
    config : FitConfig or None
    public_differences : ndarray of shape (m, d) or None
        Differences of *public* candidate embeddings for ``projection="public"``.
    prompts : ndarray of shape (n, d_x) or None
        Prompt embeddings, needed when ``cluster_on="prompt"``.
    embedder_info : dict or None
        How the embeddings were made, stored so synthesis embeds the same way.
    record_ids : sequence of str or None
        Ids that errors name (default: the row index).
    on_error : {"raise", "drop"}, default="raise"
        What to do with a record whose chosen and rejected embed identically; NaN, infinite
        and zero embeddings are always errors.

    Raises
    ------
    DataError
        An unusable embedding, naming the record and the field.
    DatasetTooSmallError
        The noisy count shows too few records for the budget (see
        :func:`~dpprefsyn.private.size.check_dataset_size`); the releases that decided it
        are spent and the error says how much.

    Privacy
    -------
    Every value that leaves this function is a DP release recorded in the ledger or
    post-processing of one: the noisy count (only when ``delta`` is None), the DP-PCA
    components, the cluster centres, the noisy histogram (and thus the kept clusters and
    their probabilities) and the rewards. DP-SGD's sampling rates and steps come from the
    noisy histogram. The budget is split before any record is read. Refusing a dataset too
    small for the budget reads only the noisy count (or, with a fixed ``delta``, the noisy
    histogram), never the exact size.
    """
    cfg = config or FitConfig()
    chosen = np.asarray(chosen, dtype=np.float64)
    rejected = np.asarray(rejected, dtype=np.float64)
    if chosen.shape != rejected.shape or chosen.ndim != 2:
        raise ValueError("chosen and rejected embeddings must be two (n, d) arrays of one shape")
    keep_rows = _checked_embeddings(chosen, rejected, record_ids, on_error)
    if prompts is not None and len(prompts) == len(chosen):
        prompts = np.asarray(prompts, dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(prompts).all(axis=1))
        if bad.size:
            where = str(bad[0]) if record_ids is None else str(record_ids[bad[0]])
            raise DataError(where, "prompt", "embedding has NaN or infinite values")
        prompts = prompts[keep_rows]
    chosen, rejected = chosen[keep_rows], rejected[keep_rows]
    n, d = chosen.shape
    rng = make_rng(cfg.insecure_seed)

    projection = cfg.projection
    if projection == "public" and public_differences is None:
        log.warning("projection='public' without public data: using no projection")
        projection = "none"
    kinds = _stage_kinds(cfg, projection)

    # Budget plan, fixed before private values are touched (except the count it may need).
    epsilon_rest = cfg.epsilon
    count_release = None
    if cfg.delta is None:
        count_eps = cfg.count_epsilon_fraction * cfg.epsilon
        noisy_n, count_release = dp_count(n, epsilon=count_eps, rng=rng)
        delta = 1.0 / max(noisy_n, 10.0)
        epsilon_rest -= count_eps
    else:
        delta = cfg.delta
    ledger = PrivacyLedger(epsilon=cfg.epsilon, delta=delta)
    if count_release is not None:
        ledger.spend(count_release)

    shares = {s: cfg.budget_split.get(s, 0.0) for s in kinds}
    if not all(shares.values()):
        raise ValueError(f"budget_split needs a positive share for each stage: {sorted(kinds)}")
    total_share = sum(shares.values())
    reserve_eps = {
        s: epsilon_rest * shares[s] / total_share for s, k in kinds.items() if k != "gaussian"
    }
    reserve_delta = {s: delta * shares[s] / total_share for s, k in kinds.items() if k == "sgd"}
    mu_avail = ledger.gaussian_mu_available(sum(reserve_eps.values()), sum(reserve_delta.values()))
    delta_gdp = delta - sum(reserve_delta.values())
    gauss_share = sum(shares[s] for s, k in kinds.items() if k == "gaussian")

    def stage_mu(stage: str) -> float:
        return mu_avail * math.sqrt(shares[stage] / gauss_share)

    def gaussian_budget(stage: str) -> dict[str, float]:
        return {"epsilon": gaussian_epsilon(stage_mu(stage), delta_gdp), "delta": delta_gdp}

    p = d if projection == "none" else min(cfg.n_components, d)
    floors = _plan_floors(cfg, kinds, stage_mu, p, d)
    if count_release is not None:  # refuse before anything else is spent
        check_dataset_size(NoisyCount.laplace(noisy_n, count_release.epsilon), floors, cfg, ledger)

    # Preference vectors: unit differences, so one record moves any sum by at most 1.
    diffs = normalize_rows(chosen - rejected)
    if projection == "public":
        components = public_projection(public_differences, cfg.n_components)
    elif projection == "dp-pca":
        pca = DPPCA(
            cfg.n_components,
            **gaussian_budget("pca"),
            row_norm_bound=1.0,
            random_state=rng,
            ledger=ledger,
        ).fit(diffs)
        components = pca.components_
    else:
        components = np.eye(d)
    z = normalize_rows(diffs @ components.T)

    k = cfg.k
    centers = None
    routing = "sample"
    cluster_input = z
    if cfg.clustering != "none" and cfg.cluster_on == "prompt":
        if prompts is None or len(prompts) != n:
            raise ValueError("cluster_on='prompt' needs one prompt embedding per record")
        cluster_input = normalize_rows(np.asarray(prompts, dtype=np.float64))
        routing = "prompt"
    if cfg.clustering == "spherical":
        km = DPSphericalKMeans(
            k,
            **gaussian_budget("cluster"),
            n_iter=cfg.kmeans_iters,
            sign_invariant=cfg.sign_invariant and routing == "sample",
            random_state=rng,
            ledger=ledger,
        ).fit(cluster_input)
        labels, centers = km.labels_, km.cluster_centers_
    elif cfg.clustering == "diffprivlib":
        # Iterations from the noisy count when there is one, as the research code sets them
        # from the size; the exact size would leak through them.
        counted = count_release is not None
        km = DiffprivlibKMeans(
            k,
            epsilon=reserve_eps["cluster"],
            bounds=cfg.kmeans_bounds,
            n_iter=None if counted else cfg.kmeans_iters,
            # None: diffprivlib's secure mode, noise from secrets.SystemRandom (a CSPRNG).
            random_state=None if cfg.insecure_seed is None else int(rng.integers(2**31)),
            ledger=ledger,
        ).fit(cluster_input, noisy_n_samples=noisy_n if counted else None)
        labels, centers = km.labels_, km.cluster_centers_
    else:
        labels = np.zeros(n, dtype=np.int64)

    hist = DPHistogram(k, **gaussian_budget("histogram"), random_state=rng, ledger=ledger)
    hist.fit(labels)
    if count_release is None:  # no count was released: the histogram's total decides
        total = NoisyCount.gaussian(float(hist.counts_.sum()), hist.noise_std_ * math.sqrt(k))
        check_dataset_size(total, floors, cfg, ledger)
    noisy = np.clip(hist.counts_, 0.0, None)
    min_fraction = cfg.min_cluster_fraction
    if min_fraction is None:
        min_fraction = 1.0 / (k + 4)
    keep = noisy >= min_fraction * noisy.sum() if k > 1 else noisy > 0
    if not keep.any():
        raise too_small(
            cfg,
            ledger,
            noisy_count=float(noisy.sum()),
            required=math.inf,
            reason=(
                f"no cluster's noisy size reaches {min_fraction:.3g} of the noisy total "
                f"{noisy.sum():.0f} (min_cluster_fraction)"
            ),
        )
    weights = hist.probabilities(keep)

    kept_ids = np.flatnonzero(keep)
    remap = np.full(k, -1)
    remap[kept_ids] = np.arange(len(kept_ids))
    rows = remap[labels] >= 0
    if cfg.reward == "dp-mean":
        reward = DPMeanReward(
            **gaussian_budget("reward"), clip=cfg.clip, random_state=rng, ledger=ledger
        )
    elif cfg.reward == "dp-newton":
        reward = DPNewtonReward(
            **gaussian_budget("reward"),
            ridge=cfg.ridge,
            clip=cfg.clip,
            random_state=rng,
            ledger=ledger,
        )
    else:
        reward = DPSGDReward(
            epsilon=reserve_eps["reward"],
            delta=reserve_delta["reward"],
            lr=cfg.lr,
            batch_size=cfg.batch_size,
            epochs=cfg.epochs,
            clip=cfg.clip,
            random_state=rng,
            ledger=ledger,
        )
    reward.fit(z[rows], remap[labels[rows]], noisy[kept_ids])
    thetas = np.zeros((k, components.shape[0]))
    thetas[kept_ids] = reward.coef_
    # Rewards were learned on unit preference vectors; candidates are scored on raw embedding
    # differences. Rescaling by the typical projected length of a *public* difference puts
    # score gaps in Bradley-Terry units for a typical pair, so a gap threshold means what it
    # says. Public data only; a positive scale changes no ranking.
    score_scale = 1.0
    if public_differences is not None:
        lengths = np.linalg.norm(np.asarray(public_differences) @ components.T, axis=1)
        if np.median(lengths) > 0:
            score_scale = float(1.0 / np.median(lengths))
    thetas *= score_scale

    report = ledger.state_dict()
    report["delta_from_noisy_count"] = cfg.delta is None
    report["delta_note"] = (
        "delta is about 1/n: it bounds the chance of a total failure of the guarantee, and "
        "values much smaller than 1/n (for example 1/n^1.1) are the safer convention"
        if delta * noisy.sum() > 0.1
        else "delta is much smaller than 1/n"
    )
    report["noise_source"] = (
        "insecure fixed seed (tests and reproductions only)"
        if cfg.insecure_seed is not None
        else "numpy PCG64 seeded with 128 bits from the OS CSPRNG"
    )
    report["noisy_cluster_counts"] = hist.counts_.tolist()
    report["kept_clusters"] = kept_ids.tolist()
    return PreferenceModel(
        projection=components,
        thetas=thetas,
        cluster_weights=weights,
        centers=centers,
        routing=routing,
        embedder=embedder_info or {},
        config={**cfg.to_dict(), "projection_used": projection, "score_scale": score_scale},
        privacy_report=report,
        versions=_versions(),
    )


def fit_preference_model(
    data: PreferenceData,
    config: FitConfig | None = None,
    *,
    embedder: Embedder | None = None,
    public_differences: np.ndarray | None = None,
    on_error: str = "raise",
) -> PreferenceModel:
    """Embed the private pairs, then :func:`fit_from_embeddings`.

    Errors name the record by its id in ``data`` (file and line) and the field. ``on_error``
    is as in :func:`fit_from_embeddings`: pass the loader's setting.
    """
    from dpprefsyn.embedding import Embedder, EmbeddingError
    from dpprefsyn.templates import get_template

    cfg = config or FitConfig()
    if embedder is None:
        embedder = Embedder(cfg.embedding_model, max_seq_length=cfg.max_seq_length)
    template = get_template(cfg.template)
    table = data.table
    ids = table["record_id"].to_list()
    prompts = table["prompt"].to_list()

    def embed(field: str, texts: list[str] | None = None) -> np.ndarray:
        try:
            if texts is None:
                return embedder.encode(prompts)
            return embedder.encode_pairs(prompts, texts, template)
        except EmbeddingError as err:  # name the record and field, not the batch index
            raise DataError(ids[err.index], field, err.reason) from None

    chosen = embed("chosen", table["chosen"].to_list())
    rejected = embed("rejected", table["rejected"].to_list())
    prompt_embeddings = embed("prompt") if cfg.cluster_on == "prompt" else None
    info = {
        "model": embedder.model_id,
        "max_seq_length": cfg.max_seq_length,
        "template": cfg.template,
        # The resolved name, so a model fitted on CPU is scored with MiniLM on GPU too.
        "embedding_model": embedder.model_name_,
    }
    return fit_from_embeddings(
        chosen,
        rejected,
        cfg,
        public_differences=public_differences,
        prompts=prompt_embeddings,
        embedder_info=info,
        record_ids=ids,
        on_error=on_error,
    )
