"""Embeddings psi(x, a) of (prompt, response) pairs with a sentence-transformer.

:class:`Embedder` renders pairs with a :mod:`~dpprefsyn.templates` template, keeps the response
when the pair is longer than the model's window (:func:`truncate_pairs`), and can keep vectors
in an on-disk :class:`EmbeddingCache`. That cache holds embeddings of private texts: it lives
with the private data and is never shipped.
"""

from dpprefsyn.embedding.cache import EmbeddingCache, text_key
from dpprefsyn.embedding.embedder import Embedder, EmbeddingError
from dpprefsyn.embedding.models import CUDA_DEFAULT_MODEL, default_model, model_fingerprint
from dpprefsyn.embedding.truncation import truncate_pairs

__all__ = [
    "CUDA_DEFAULT_MODEL",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingError",
    "default_model",
    "model_fingerprint",
    "text_key",
    "truncate_pairs",
]
