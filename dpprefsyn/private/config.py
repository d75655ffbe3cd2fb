"""Configuration of the private fit: one dataclass, presets for the paper and our default."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

PROJECTIONS = ("dp-pca", "public", "none")
CLUSTERINGS = ("none", "spherical", "diffprivlib")
REWARDS = ("dp-newton", "dp-mean", "dp-sgd")


@dataclass
class FitConfig:
    """Settings of the private preference fit.

    Parameters
    ----------
    epsilon : float, default=2.0
        Total privacy budget of the fit.
    delta : float or None, default=None
        Total delta; ``None`` sets ``1/n~`` from a Laplace count that costs
        ``count_epsilon_fraction * epsilon``, so the exact ``n`` is never used.
    projection : {"dp-pca", "public", "none"}, default="public"
        How embeddings are reduced to ``n_components`` dimensions: a DP-PCA of the private
        differences (spends budget), an uncentred PCA of *public* candidate differences (free),
        or none. ``"public"`` falls back to ``"none"`` when no public embeddings are given
        (on HH-RLHF, paying for DP-PCA cost more accuracy than it bought).
    n_components : int, default=64
        64 measured better than the method's 20 with a public projection (BENCHMARKS.md).
    clustering : {"none", "spherical", "diffprivlib"}, default="none"
        ``"none"`` learns one reward (K=1); ``"spherical"`` is our Gaussian spherical k-means;
        ``"diffprivlib"`` is the research code's DP k-means with per-feature ``kmeans_bounds``.
    n_clusters : int, default=5
    cluster_on : {"difference", "prompt"}, default="difference"
        What is clustered. ``"difference"`` is the method's (preference vectors; synthesis then
        draws a cluster per prompt from the noisy histogram). ``"prompt"`` clusters the prompt
        embeddings, so a public prompt is routed to the cluster of its nearest centre: a
        label-blind rule that lets rewards differ between topics.
    sign_invariant : bool, default=True
        Cluster axes, not directions (only for ``"spherical"`` on differences).
    kmeans_iters : int, default=5
    kmeans_bounds : tuple of float, default=(-0.5, 0.5)
    min_cluster_fraction : float or None, default=None
        Clusters whose noisy size is below this fraction of the noisy total are dropped;
        ``None`` means ``1 / (n_clusters + 4)``, as in the method.
    reward : {"dp-newton", "dp-mean", "dp-sgd"}, default="dp-newton"
        ``dp-newton``: one Newton step on noisy first and second moments; ``dp-mean``: the
        noisy mean (isotropic Newton step); ``dp-sgd``: the method's DP-SGD.
    ridge : float, default=0.01
        Ridge of ``dp-newton``.
    lr, batch_size, epochs, clip : DP-SGD settings (defaults 0.1, 4, 4, 1.0).
    budget_split : dict
        Relative shares of the stages that run. Gaussian stages share GDP ``mu**2`` in these
        proportions; pure and DP-SGD stages take ``share * epsilon`` (and ``share * delta``).
    count_epsilon_fraction : float, default=0.02
    embedding_model : str or None, default=None
        ``None``: all-MiniLM-L6-v2 on CPU, bge-large-en-v1.5 on GPU.
    max_seq_length : int or None, default=256
    template : str, default="dialogue"
    insecure_seed : int or None, default=None
        Fixes the noise for tests and reproductions; recorded as insecure in the report.
    """

    epsilon: float = 2.0
    delta: float | None = None
    projection: Literal["dp-pca", "public", "none"] = "public"
    n_components: int = 64
    clustering: Literal["none", "spherical", "diffprivlib"] = "none"
    n_clusters: int = 5
    cluster_on: Literal["difference", "prompt"] = "difference"
    sign_invariant: bool = True
    kmeans_iters: int = 5
    kmeans_bounds: tuple[float, float] = (-0.5, 0.5)
    min_cluster_fraction: float | None = None
    reward: Literal["dp-newton", "dp-mean", "dp-sgd"] = "dp-newton"
    ridge: float = 0.01
    lr: float = 0.1
    batch_size: int = 4
    epochs: float = 4.0
    clip: float = 1.0
    budget_split: dict[str, float] = field(
        default_factory=lambda: {"pca": 0.3, "cluster": 0.2, "histogram": 0.05, "reward": 0.45}
    )
    count_epsilon_fraction: float = 0.02
    embedding_model: str | None = None
    max_seq_length: int | None = 256
    template: str = "dialogue"
    insecure_seed: int | None = None

    def __post_init__(self) -> None:
        if not self.epsilon > 0:
            raise ValueError(f"epsilon must be positive, got {self.epsilon}")
        if self.delta is not None and not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {self.delta}")
        for name, allowed in (
            ("projection", PROJECTIONS),
            ("clustering", CLUSTERINGS),
            ("reward", REWARDS),
            ("cluster_on", ("difference", "prompt")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.n_components < 1 or self.n_clusters < 1 or self.batch_size < 1:
            raise ValueError("n_components, n_clusters and batch_size must be at least 1")
        unknown = set(self.budget_split) - {"pca", "cluster", "histogram", "reward"}
        if unknown:
            raise ValueError(f"budget_split has unknown stages {sorted(unknown)}")
        if any(v < 0 for v in self.budget_split.values()):
            raise ValueError("budget_split shares must be non-negative")
        if not 0 < self.count_epsilon_fraction < 0.5:
            raise ValueError("count_epsilon_fraction must be in (0, 0.5)")
        self.kmeans_bounds = tuple(self.kmeans_bounds)

    @property
    def k(self) -> int:
        """Number of clusters actually fitted."""
        return 1 if self.clustering == "none" else self.n_clusters

    @classmethod
    def paper(cls, **overrides: Any) -> FitConfig:
        """The research configuration: DP-PCA, diffprivlib k-means K=5, DP-SGD rewards."""
        base = dict(
            projection="dp-pca",
            n_components=20,
            clustering="diffprivlib",
            n_clusters=5,
            reward="dp-sgd",
            budget_split={"pca": 0.25, "cluster": 0.25, "histogram": 0.05, "reward": 0.45},
        )
        return cls(**{**base, **overrides})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
