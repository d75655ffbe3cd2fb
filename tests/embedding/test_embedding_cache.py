"""On-disk vector cache: round trip, model separation, privacy hygiene."""

from __future__ import annotations

import sqlite3
import stat

import numpy as np
import pytest

from dpprefsyn.embedding import EmbeddingCache, model_fingerprint, text_key


def vectors(n: int, dim: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def test_round_trip_and_missing_keys(tmp_path):
    cache = EmbeddingCache(tmp_path, "m@1", 4)
    keys = [text_key(t) for t in ("a", "b", "c")]
    cache.put(keys[:2], vectors(2))
    found = cache.get(keys)
    assert set(found) == set(keys[:2])
    np.testing.assert_array_equal(np.stack([found[k] for k in keys[:2]]), vectors(2))
    assert len(cache) == 2


def test_models_do_not_share_entries_and_dimension_is_checked(tmp_path):
    key = text_key("same text")
    EmbeddingCache(tmp_path, "m@1", 4).put([key], vectors(1))
    assert EmbeddingCache(tmp_path, "m@2", 4).get([key]) == {}
    with pytest.raises(ValueError, match="4-d"):
        EmbeddingCache(tmp_path, "m@1", 8)


def test_many_keys_are_looked_up_in_chunks(tmp_path):
    cache = EmbeddingCache(tmp_path, "m@1", 4)
    keys = [text_key(str(i)) for i in range(2500)]
    cache.put(keys, vectors(2500))
    assert len(cache.get(keys)) == 2500


def test_a_second_handle_reads_what_the_first_wrote(tmp_path):
    writer, reader = EmbeddingCache(tmp_path, "m@1", 4), EmbeddingCache(tmp_path, "m@1", 4)
    writer.put([text_key("x")], vectors(1))
    assert text_key("x") in reader.get([text_key("x")])
    assert sqlite3.connect(writer.path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_store_is_private_and_holds_no_clear_text(tmp_path):
    secret = "my very private sentence 1234"
    cache = EmbeddingCache(tmp_path / "private-embedding-cache", "m@1", 4)
    cache.put([text_key(secret)], vectors(1))
    assert stat.S_IMODE(cache.directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(cache.path.stat().st_mode) == 0o600
    assert (cache.directory / EmbeddingCache.NOTICE_FILENAME).read_text().startswith("PRIVATE")
    for path in cache.directory.iterdir():
        assert secret.encode() not in path.read_bytes()


def test_put_rejects_wrong_shape(tmp_path):
    with pytest.raises(ValueError, match="shape"):
        EmbeddingCache(tmp_path, "m@1", 4).put([text_key("a")], vectors(1, dim=3))


def test_fingerprint_follows_weights_not_docs(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights-1")
    first = model_fingerprint(str(tmp_path))
    (tmp_path / "README.md").write_text("docs changed")
    assert model_fingerprint(str(tmp_path)) == first
    (tmp_path / "model.safetensors").write_bytes(b"weights-2")
    assert model_fingerprint(str(tmp_path)) != first
