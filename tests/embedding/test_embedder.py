"""Embedder: default model offline, vectors equal to SentenceTransformer's, cache, guards."""

from __future__ import annotations

import gzip
import json
import sqlite3

import numpy as np
import pytest

from dpprefsyn.embedding import Embedder, EmbeddingCache, EmbeddingError
from dpprefsyn.embedding import embedder as embedder_module

TEXTS = [
    "A short text.",
    "A somewhat longer text about baking bread with flour, water, salt and yeast.",
    "word " * 400,  # longer than the 256-token window: right-truncated like ST does
]


def counting(embedder: Embedder, monkeypatch) -> list[int]:
    """Wrap the model call; the list gets the number of texts of each call."""
    calls: list[int] = []
    original = embedder._embed

    def wrapped(texts, progress=None):
        calls.append(len(texts))
        return original(texts, progress)

    monkeypatch.setattr(embedder, "_embed", wrapped)
    return calls


def test_default_model_loads_offline(embedder):
    assert embedder.dimension == 384
    assert embedder.model_id.startswith("model@sha256:")
    assert "|max_seq_length=256|pair_truncation=tail-v1" in embedder.model_id
    assert embedder.load() is embedder


def test_vectors_match_plain_sentence_transformers(embedder):
    ours = embedder.encode(TEXTS)
    plain = embedder._st.encode(TEXTS, convert_to_numpy=True)
    assert ours.dtype == np.float32 and ours.shape == (3, 384)
    np.testing.assert_allclose((ours * plain).sum(1), 1.0, atol=1e-4)


def test_empty_input_gives_empty_matrix(embedder):
    assert embedder.encode([]).shape == (0, 384)
    assert embedder.encode_pairs([], []).shape == (0, 384)


def test_batches_group_texts_of_similar_length(embedder, monkeypatch):
    monkeypatch.setattr(embedder, "batch_size", 2)
    lengths = np.array([10, 256, 3, 256, 100])
    batches = [b.tolist() for b in embedder._batches(lengths)]
    assert batches == [[1, 3], [4, 0], [2]]  # longest first, every index once


@pytest.mark.realdata
def test_long_hh_dialogue_keeps_chosen_and_rejected_apart(embedder, shared_data):
    """Right truncation gives chosen and rejected the same tokens; ours keeps the responses."""
    tokenizer = embedder._st.tokenizer
    path = shared_data / "hh-rlhf/harmless-base/test.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            right = tokenizer(
                [record["chosen"], record["rejected"]], truncation=True, max_length=256
            )["input_ids"]
            if right[0] == right[1] and record["chosen"] != record["rejected"]:
                break
    cut = record["chosen"].rfind("\n\nAssistant:") + len("\n\nAssistant:")
    prompt = record["chosen"][:cut]
    assert record["rejected"].startswith(prompt)
    responses = [record["chosen"][cut:].strip(), record["rejected"][cut:].strip()]

    plain = embedder.encode([record["chosen"], record["rejected"]])
    assert float(plain[0] @ plain[1]) > 0.9999  # right truncation: indistinguishable

    texts = embedder.truncate_pairs([prompt, prompt], responses)
    assert texts[0].endswith(responses[0]) and texts[1].endswith(responses[1])
    ours = embedder.encode_pairs([prompt, prompt], responses)
    assert float(ours[0] @ ours[1]) < 0.99


def test_cache_hit_means_no_model_call(embedder, tmp_path, monkeypatch):
    cached = Embedder(device="cpu", cache_dir=tmp_path, show_progress=False)
    calls = counting(cached.load(), monkeypatch)
    texts = ["alpha", "beta", "alpha", "gamma"]
    first = cached.encode(texts)
    assert calls == [3]  # the duplicate is embedded once
    np.testing.assert_array_equal(first[0], first[2])
    np.testing.assert_array_equal(cached.encode(texts[::-1]), first[::-1])
    assert calls == [3]

    rerun = Embedder(device="cpu", cache_dir=tmp_path, show_progress=False)
    rerun_calls = counting(rerun.load(), monkeypatch)
    np.testing.assert_array_equal(rerun.encode(texts + ["delta"])[:4], first)
    assert rerun_calls == [1]

    # another model_id (here: another window) never reads those vectors
    other = Embedder(device="cpu", max_seq_length=128, cache_dir=tmp_path, show_progress=False)
    other_calls = counting(other.load(), monkeypatch)
    assert other.model_id != cached.model_id
    other.encode(texts)
    assert other_calls == [3]
    rows = sqlite3.connect(tmp_path / EmbeddingCache.FILENAME).execute(
        "SELECT COUNT(*) FROM models"
    )
    assert rows.fetchone()[0] == 2


def test_interrupted_run_resumes_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(embedder_module, "_CACHE_CHUNK", 2)
    cached = Embedder(device="cpu", cache_dir=tmp_path, show_progress=False).load()
    original = cached._embed

    def dies_on_second_chunk(texts, progress=None):
        if len(cached._cache):
            raise KeyboardInterrupt
        return original(texts, progress)

    monkeypatch.setattr(cached, "_embed", dies_on_second_chunk)
    texts = ["one", "two", "three", "four"]
    with pytest.raises(KeyboardInterrupt):
        cached.encode(texts)
    assert len(cached._cache) == 2  # the first chunk survived
    monkeypatch.setattr(cached, "_embed", original)
    calls = counting(cached, monkeypatch)
    assert cached.encode(texts).shape == (4, 384)
    assert calls == [2]


@pytest.mark.parametrize(("bad", "reason"), [(np.nan, "NaN"), (0.0, "zero")])
def test_bad_vectors_raise_naming_the_record(tmp_path, monkeypatch, bad, reason):
    guarded = Embedder(device="cpu", cache_dir=tmp_path, show_progress=False).load()

    def broken(texts, progress=None):
        out = np.ones((len(texts), 384), dtype=np.float32)
        out[1] = bad
        return out

    monkeypatch.setattr(guarded, "_embed", broken)
    secret = "private words"
    with pytest.raises(EmbeddingError, match=rf"record #2, .*{reason}") as info:
        guarded.encode(["x", "x", secret])  # duplicate collapses: row 1 of the call is record 2
    assert info.value.index == 2
    assert secret not in str(info.value)
    assert len(guarded._cache) == 0


def test_input_validation(embedder):
    with pytest.raises(TypeError, match="#1"):
        embedder.encode(["ok", None])
    with pytest.raises(ValueError, match="prompts"):
        embedder.encode_pairs(["a"], [])
    with pytest.raises(ValueError, match="batch_size"):
        Embedder(batch_size=0).load()
    with pytest.raises(ValueError, match="max_seq_length"):
        Embedder(max_seq_length=100_000).load()
