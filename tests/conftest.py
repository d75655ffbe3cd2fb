"""Shared fixtures: the real public data beside the project, and small synthetic tables."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def owner_state_dir(tmp_path_factory) -> Path:
    """Where ``dpprefsyn fit`` keeps budget logs during tests (not the working directory)."""
    state = tmp_path_factory.mktemp("owner-state")
    os.environ["DPPREFSYN_STATE_DIR"] = str(state)
    return state


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests that need it are skipped where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory) -> Path:
    """A small demo dataset (simulated users with known tastes), shared by end-to-end tests."""
    import json

    from canaries import CANARY

    from pipelines.make_demo_data import make

    out = tmp_path_factory.mktemp("demo")
    make(out, n_private=300, seed=1)
    canary = {"prompt": f"Ask {CANARY}", "chosen": f"Yes {CANARY}", "rejected": "No."}
    with (out / "private.jsonl").open("a") as f:
        f.write(json.dumps(canary) + "\n")
    return out


@pytest.fixture(scope="session")
def embedding_cache(tmp_path_factory) -> Path:
    """One embedding cache for the session, so each demo text is embedded once."""
    return tmp_path_factory.mktemp("embeddings")
