"""On-disk store of embedding vectors, keyed by model and by a hash of the embedded text.

The vectors are derived from private texts, so the store is private data: keep it beside the
private dataset and never ship or publish it. The texts themselves are never written, only
their sha256 digests; a digest is not anonymisation, though (anyone holding a candidate text can
check whether it is in the store), which is one more reason the store stays private.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path

import numpy as np

__all__ = ["EmbeddingCache", "text_key"]

_NOTICE = """\
PRIVATE DATA - DO NOT SHIP, UPLOAD OR PUBLISH.

This folder holds sentence embeddings of private texts, written by dpprefsyn's embedding cache.
It is as private as the dataset it came from: keep it with that dataset and delete it with it.
Texts are stored only as sha256 digests, which still let anyone holding a candidate text test
whether it is present.
"""

# SQLite caps bound parameters per statement (32766 since 3.32, 999 before): stay below both.
_LOOKUP_CHUNK = 900


def text_key(text: str) -> bytes:
    """Cache key of a text: the sha256 digest of its UTF-8 bytes (32 bytes)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class EmbeddingCache:
    """Vectors of one model in an SQLite file, looked up by :func:`text_key`.

    One file serves every model, each under its own ``model_id``, so switching models (or the
    window length, which is part of the id) never returns another model's vectors. SQLite in
    WAL mode lets several processes read while one writes, and a write is one transaction,
    so a crash never leaves a half-written vector behind. WAL needs a local file system, not
    NFS.

    Parameters
    ----------
    directory : str or os.PathLike
        Folder of the store, created with owner-only permissions if absent. Name it as private
        data (e.g. ``<private data>/private-embedding-cache``); a notice file says it again.
    model_id : str
        Identity of the model weights and the settings that change its vectors.
    dimension : int
        Length of the vectors; a mismatch with what the store holds for ``model_id`` is an error.
    """

    FILENAME = "private_embeddings.sqlite"
    NOTICE_FILENAME = "PRIVATE_DO_NOT_SHIP.txt"

    def __init__(self, directory: str | os.PathLike[str], model_id: str, dimension: int) -> None:
        self.directory = Path(directory)
        self.model_id = model_id
        self.dimension = dimension
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        notice = self.directory / self.NOTICE_FILENAME
        if not notice.exists():
            notice.write_text(_NOTICE, encoding="utf-8")
        self.path = self.directory / self.FILENAME
        if not self.path.exists():
            # Created by hand so that its permissions are owner-only from the first byte.
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        with closing(self._connect()) as conn, conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS models (id INTEGER PRIMARY KEY,"
                " model_id TEXT UNIQUE NOT NULL, dimension INTEGER NOT NULL)"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model INTEGER NOT NULL, key BLOB NOT NULL,"
                " vector BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID"
            )
            conn.execute(
                "INSERT OR IGNORE INTO models (model_id, dimension) VALUES (?, ?)",
                (model_id, dimension),
            )
            row_id, stored_dim = conn.execute(
                "SELECT id, dimension FROM models WHERE model_id = ?", (model_id,)
            ).fetchone()
        if stored_dim != dimension:
            raise ValueError(
                f"cache {self.path} holds {stored_dim}-d vectors for this model_id, not {dimension}"
            )
        self._row_id: int = row_id

    def _connect(self) -> sqlite3.Connection:
        # A connection per operation: safe across threads and forked workers, and cheap next to
        # a model call. The timeout makes concurrent writers wait instead of failing.
        return sqlite3.connect(self.path, timeout=60.0)

    def get(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Vectors stored for ``keys``; keys not in the store are absent from the result."""
        found: dict[bytes, np.ndarray] = {}
        with closing(self._connect()) as conn:
            for start in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = keys[start : start + _LOOKUP_CHUNK]
                rows = conn.execute(
                    "SELECT key, vector FROM vectors WHERE model = ? AND key IN "
                    f"({', '.join('?' * len(chunk))})",
                    (self._row_id, *chunk),
                )
                for key, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put(self, keys: Iterable[bytes], vectors: np.ndarray) -> None:
        """Store ``vectors`` (one row per key) in one transaction; existing keys are kept."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dimension:
            raise ValueError(
                f"expected vectors of shape (n, {self.dimension}), got {vectors.shape}"
            )
        rows = [(self._row_id, key, vec.tobytes()) for key, vec in zip(keys, vectors, strict=True)]
        with closing(self._connect()) as conn, conn:
            conn.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?)", rows)

    def __len__(self) -> int:
        """Count the vectors stored for this ``model_id``."""
        with closing(self._connect()) as conn:
            return conn.execute(
                "SELECT COUNT(*) FROM vectors WHERE model = ?", (self._row_id,)
            ).fetchone()[0]
