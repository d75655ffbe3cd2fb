"""Fixtures for the loader tests: a canary string and writers of small input files."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

CANARY = "canary-5f1e9c-private-text"
"""Appears in every synthetic text; it must never show up in a repr or an error message."""


@pytest.fixture
def canary() -> str:
    return CANARY


@pytest.fixture
def good_record() -> dict[str, str]:
    return {
        "prompt": f"Say hello. {CANARY}",
        "chosen": f"Hello! {CANARY}",
        "rejected": f"Go away. {CANARY}",
    }


WriteLines = Callable[[str, Sequence[object]], Path]


@pytest.fixture
def write_jsonl(tmp_path: Path) -> WriteLines:
    """Write records as JSON Lines under ``tmp_path``; ``bytes`` items are written verbatim."""

    def write(name: str, records: Sequence[object]) -> Path:
        lines = [r if isinstance(r, bytes) else json.dumps(r).encode() for r in records]
        path = tmp_path / name
        path.write_bytes(b"\n".join(lines) + b"\n")
        return path

    return write
