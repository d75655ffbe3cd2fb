"""Fixtures of the hostile-input tests: one small demo and one pipeline workspace per module."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hostile_corpus import CANARY, Demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Demo:
    """Demo records and a four-prompt public slice (32 candidates)."""
    return Demo(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """One out_dir and state_dir for a module: public steps are cached across its runs."""
    return tmp_path_factory.mktemp("workspace")


@pytest.fixture
def write_config(demo: Demo, workspace: Path, embedding_cache: Path):
    """Write a pipeline config for ``private`` (and optional public files); return its path."""

    def write(
        private: Path,
        *,
        prompts: Path | None = None,
        candidates: Path | None = None,
        on_error: str = "raise",
        **fit,
    ) -> Path:
        cfg = {
            "name": "hostile",
            "out_dir": str(workspace / "out"),
            "state_dir": str(workspace / "state"),
            "embedding_cache": str(embedding_cache),
            "private": {"path": str(private), "on_error": on_error},
            # 8 dimensions: the public slice gives 40 candidate differences, fewer than 64.
            "fit": {"epsilon": 8.0, "n_components": 8, "insecure_seed": 0, **fit},
            "budget": {"lifetime_epsilon": 1000.0},
            "prompts": [{"path": str(prompts or demo.prompts)}],
            "generation": {
                "backend": "pool",
                "n": 8,
                "pool": {"sources": [str(candidates or demo.candidates)]},
            },
        }
        path = workspace / "config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        return path

    return write


@pytest.fixture
def no_leak(capfd):
    """Return a checker of what a run printed: no traceback and no private text."""

    def check() -> str:
        out, err = capfd.readouterr()
        text = out + err
        assert "Traceback" not in text
        assert CANARY not in text
        return err

    return check
