"""The private fit: private preference pairs in, a DP preference model out."""

from __future__ import annotations

import logging
import math
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
from dpprefsyn.privacy import PrivacyLedger, make_rng
from dpprefsyn.privacy.analysis import gaussian_epsilon
from dpprefsyn.private.config import FitConfig
from dpprefsyn.projection import public_projection

if TYPE_CHECKING:
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


def fit_from_embeddings(
    chosen: np.ndarray,
    rejected: np.ndarray,
    config: FitConfig | None = None,
    *,
    public_differences: np.ndarray | None = None,
    prompts: np.ndarray | None = None,
    embedder_info: dict | None = None,
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

    Privacy
    -------
    Every value that leaves this function is a DP release recorded in the ledger or
    post-processing of one: the noisy count (only when ``delta`` is None), the DP-PCA
    components, the cluster centres, the noisy histogram (and thus the kept clusters and
    their probabilities) and the rewards. DP-SGD's sampling rates and steps come from the
    noisy histogram. The budget is split before any record is read.
    """
    cfg = config or FitConfig()
    chosen = np.asarray(chosen, dtype=np.float64)
    rejected = np.asarray(rejected, dtype=np.float64)
    if chosen.shape != rejected.shape or chosen.ndim != 2:
        raise ValueError("chosen and rejected embeddings must be two (n, d) arrays of one shape")
    n, d = chosen.shape
    bad = ~(np.isfinite(chosen).all(axis=1) & np.isfinite(rejected).all(axis=1))
    if bad.any():
        raise ValueError(f"record {int(np.flatnonzero(bad)[0])}: embedding has NaN or inf values")
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

    def gaussian_budget(stage: str) -> dict[str, float]:
        mu = mu_avail * math.sqrt(shares[stage] / gauss_share)
        return {"epsilon": gaussian_epsilon(mu, delta_gdp), "delta": delta_gdp}

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
            random_state=int(rng.integers(2**31)),
            ledger=ledger,
        ).fit(cluster_input, noisy_n_samples=noisy_n if counted else None)
        labels, centers = km.labels_, km.cluster_centers_
    else:
        labels = np.zeros(n, dtype=np.int64)

    hist = DPHistogram(k, **gaussian_budget("histogram"), random_state=rng, ledger=ledger)
    hist.fit(labels)
    noisy = np.clip(hist.counts_, 0.0, None)
    min_fraction = cfg.min_cluster_fraction
    if min_fraction is None:
        min_fraction = 1.0 / (k + 4)
    keep = noisy >= min_fraction * noisy.sum() if k > 1 else noisy > 0
    if not keep.any():
        raise ValueError(
            f"the noisy record count is zero at epsilon={cfg.epsilon}: the dataset is too small "
            "for this budget"
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
) -> PreferenceModel:
    """Embed the private pairs, then :func:`fit_from_embeddings`."""
    from dpprefsyn.embedding import Embedder
    from dpprefsyn.templates import get_template

    cfg = config or FitConfig()
    if embedder is None:
        embedder = Embedder(cfg.embedding_model, max_seq_length=cfg.max_seq_length)
    template = get_template(cfg.template)
    table = data.table
    prompts = table["prompt"].to_list()
    chosen = embedder.encode_pairs(prompts, table["chosen"].to_list(), template)
    rejected = embedder.encode_pairs(prompts, table["rejected"].to_list(), template)
    prompt_embeddings = embedder.encode(prompts) if cfg.cluster_on == "prompt" else None
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
    )
