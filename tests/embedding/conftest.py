"""Fixtures for the embedding tests: the bundled MiniLM model, loaded once per session."""

from __future__ import annotations

import pytest

from dpprefsyn.embedding import Embedder


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The default CPU Embedder (bundled all-MiniLM-L6-v2), no cache; loading takes seconds."""
    return Embedder(device="cpu", show_progress=False).load()


@pytest.fixture(scope="session")
def tokenizer(embedder: Embedder):
    """The MiniLM (BERT WordPiece, fast) tokenizer."""
    return embedder._st.tokenizer
