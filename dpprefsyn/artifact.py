"""The private preference model: everything after the private fit reads only this.

It holds DP releases and their post-processing (projection, centres, rewards, noisy cluster
probabilities), the configuration and the privacy report; loading it needs no private data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ARRAYS_FILE = "model.npz"
META_FILE = "model.json"
REPORT_FILE = "privacy_report.json"


@dataclass
class PreferenceModel:
    """Linear per-cluster rewards on sentence embeddings.

    The reward of response ``a`` to prompt ``x`` under cluster ``k`` is
    ``theta_k . P psi(x, a)``: linear in the embedding, so any constant shared by two responses
    to the same prompt cancels in their comparison.

    Attributes
    ----------
    projection : ndarray of shape (p, d)
        Rows span the preference subspace of the embedding space.
    thetas : ndarray of shape (K, p)
    cluster_weights : ndarray of shape (K,)
        Noisy cluster probabilities; zero for dropped clusters.
    centers : ndarray of shape (K, p) or (K, d_x), or None
        Cluster centres: in preference space, or in prompt-embedding space when routing is
        ``"prompt"``.
    routing : {"sample", "prompt"}
        How a prompt gets its cluster at synthesis: drawn from ``cluster_weights`` (the
        method), or the nearest centre to the prompt's embedding among kept clusters.
    embedder : dict
        How psi was made: model, max_seq_length, template; synthesis must embed the same way.
    config, privacy_report, versions : dict
    """

    projection: np.ndarray
    thetas: np.ndarray
    cluster_weights: np.ndarray
    embedder: dict[str, Any]
    centers: np.ndarray | None = None
    routing: str = "sample"
    config: dict[str, Any] = field(default_factory=dict)
    privacy_report: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        k = len(self.cluster_weights)
        if self.thetas.shape != (k, self.projection.shape[0]):
            raise ValueError("thetas must be (n_clusters, n_components)")
        if not np.isclose(self.cluster_weights.sum(), 1.0):
            raise ValueError("cluster_weights must sum to 1")
        if self.routing not in ("sample", "prompt"):
            raise ValueError(f"routing must be 'sample' or 'prompt', got {self.routing!r}")
        if self.routing == "prompt" and self.centers is None:
            raise ValueError("prompt routing needs cluster centres")

    @property
    def n_clusters(self) -> int:
        return len(self.cluster_weights)

    @property
    def kept_clusters(self) -> np.ndarray:
        return np.flatnonzero(self.cluster_weights > 0)

    @property
    def reward_directions(self) -> np.ndarray:
        """``(K, d)`` matrix ``theta_k P``: one dot product per cluster scores a response."""
        return self.thetas @ self.projection

    def scores(self, psi: np.ndarray) -> np.ndarray:
        """Reward of each embedded response under each cluster, shape ``(m, K)``."""
        psi = np.asarray(psi, dtype=np.float64)
        if psi.ndim != 2 or psi.shape[1] != self.projection.shape[1]:
            raise ValueError(
                f"embeddings must be (m, {self.projection.shape[1]}); got {psi.shape}: "
                "embed with the model's own embedder settings"
            )
        return psi @ self.reward_directions.T

    def route(self, prompt_embeddings: np.ndarray) -> np.ndarray:
        """Cluster of each prompt under prompt routing: the nearest kept centre (cosine)."""
        if self.routing != "prompt":
            raise ValueError("this model draws clusters from its weights; it has no routing")
        x = np.asarray(prompt_embeddings, dtype=np.float64)
        sims = x @ self.centers.T
        sims[:, self.cluster_weights == 0] = -np.inf
        return sims.argmax(axis=1)

    def mean_reward(self, psi: np.ndarray) -> np.ndarray:
        """Mean of the kept clusters' rewards (the PPO reward of the method)."""
        return self.scores(psi)[:, self.kept_clusters].mean(axis=1)

    def mixture_reward(self, psi: np.ndarray) -> np.ndarray:
        """Rewards averaged with the noisy cluster probabilities."""
        return self.scores(psi) @ self.cluster_weights

    # --- persistence -------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        arrays = {
            "projection": self.projection,
            "thetas": self.thetas,
            "cluster_weights": self.cluster_weights,
        }
        if self.centers is not None:
            arrays["centers"] = self.centers
        np.savez(out / ARRAYS_FILE, **arrays)
        meta = {
            "embedder": self.embedder,
            "routing": self.routing,
            "config": self.config,
            "versions": self.versions,
        }
        (out / META_FILE).write_text(json.dumps(meta, indent=2, default=str))
        (out / REPORT_FILE).write_text(json.dumps(self.privacy_report, indent=2, default=str))
        return out

    @classmethod
    def load(cls, directory: str | Path) -> PreferenceModel:
        src = Path(directory)
        missing = [f for f in (ARRAYS_FILE, META_FILE, REPORT_FILE) if not (src / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{src} is not a preference model: missing {missing}")
        with np.load(src / ARRAYS_FILE) as arrays:
            data = {k: arrays[k] for k in arrays.files}
        meta = json.loads((src / META_FILE).read_text())
        return cls(
            projection=data["projection"],
            thetas=data["thetas"],
            cluster_weights=data["cluster_weights"],
            centers=data.get("centers"),
            routing=meta.get("routing", "sample"),
            embedder=meta["embedder"],
            config=meta["config"],
            versions=meta["versions"],
            privacy_report=json.loads((src / REPORT_FILE).read_text()),
        )
