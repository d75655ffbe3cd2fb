"""Lifetime privacy budget per private dataset, shared by every run that fits on it.

Each fit on the same private data is new spending; a reuse of a cached model is not. Spends
across runs compose by basic composition (epsilons and deltas add), which holds whatever each
run chose to do.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from dpprefsyn.errors import BudgetError


class BudgetLockedError(RuntimeError):
    """Another run holds the lock of this private dataset's budget."""


class BudgetStore:
    """A folder of ``<fingerprint>.json`` spend logs, each guarded by a file lock.

    Parameters
    ----------
    directory : path
        Lives with the private data's owner; it names datasets only by keyed fingerprint.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def _log(self, fingerprint: str) -> Path:
        return self.directory / f"{fingerprint}.json"

    @contextlib.contextmanager
    def lock(self, fingerprint: str, timeout: float = 0.0) -> Iterator[None]:
        """Hold the dataset's lock so two scheduled runs cannot spend at once."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{fingerprint}.lock"
        with open(path, "w") as handle:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise BudgetLockedError(
                            f"another run is spending the budget of dataset {fingerprint}"
                        ) from None
                    time.sleep(0.2)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def spends(self, fingerprint: str) -> list[dict]:
        path = self._log(fingerprint)
        return json.loads(path.read_text())["spends"] if path.exists() else []

    def spent(self, fingerprint: str) -> tuple[float, float]:
        """Total (epsilon, delta) spent on this dataset so far."""
        s = self.spends(fingerprint)
        return sum(x["epsilon"] for x in s), sum(x["delta"] for x in s)

    def check(
        self,
        fingerprint: str,
        *,
        epsilon: float,
        delta: float,
        lifetime_epsilon: float,
        lifetime_delta: float | None = None,
    ) -> None:
        """Raise :class:`BudgetError` when a spend would exceed the lifetime budget."""
        eps, dlt = self.spent(fingerprint)
        over_delta = lifetime_delta is not None and dlt + delta > lifetime_delta
        if eps + epsilon > lifetime_epsilon * (1 + 1e-9) or over_delta:
            raise BudgetError(
                f"dataset {fingerprint} has spent epsilon={eps:.4g}, delta={dlt:.3g} of its "
                f"lifetime budget (epsilon={lifetime_epsilon:.4g}, delta={lifetime_delta}); "
                f"this fit needs epsilon={epsilon:.4g}, delta={delta:.3g}. "
                "Nothing was run or written."
            )

    def record(self, fingerprint: str, *, epsilon: float, delta: float, run: str) -> None:
        """Append a spend (call while holding :meth:`lock`)."""
        spends = self.spends(fingerprint)
        spends.append(
            {
                "epsilon": epsilon,
                "delta": delta,
                "run": run,
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        )
        path = self._log(fingerprint)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"fingerprint": fingerprint, "spends": spends}, indent=2))
        tmp.replace(path)
