"""Named steps whose outputs are cached by a signature of their inputs and settings.

A step's folder is ``<out>/.steps/<name>-<signature>``; a ``_done.json`` marker makes it a cache
hit. The signature is a hash of the step's settings (minus runtime-only ones), its inputs'
signatures and the package version, so changing a late step reruns only what follows it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpprefsyn import __version__

DONE = "_done.json"


def signature(payload: Any) -> str:
    blob = json.dumps({"payload": payload, "version": __version__}, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


@dataclass
class StepResult:
    name: str
    signature: str
    path: Path
    cached: bool
    seconds: float
    info: dict[str, Any] = field(default_factory=dict)


class Runner:
    """Runs steps in order, skipping those whose output for the same signature exists."""

    def __init__(self, out_dir: str | Path) -> None:
        self.steps_dir = Path(out_dir) / ".steps"
        self.results: list[StepResult] = []

    def run(self, name: str, payload: Any, fn: Callable[[Path], dict[str, Any]]) -> StepResult:
        """Run ``fn(folder) -> info`` unless ``name`` already ran with this ``payload``."""
        sig = signature(payload)
        path = self.steps_dir / f"{name}-{sig}"
        done = path / DONE
        start = time.perf_counter()
        if done.exists():
            result = StepResult(name, sig, path, True, 0.0, json.loads(done.read_text()))
        else:
            path.mkdir(parents=True, exist_ok=True)
            info = fn(path)
            done.write_text(json.dumps(info, indent=2, default=str))
            result = StepResult(name, sig, path, False, time.perf_counter() - start, info)
        result.seconds = time.perf_counter() - start
        self.results.append(result)
        return result
