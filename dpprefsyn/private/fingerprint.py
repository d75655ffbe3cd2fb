"""Keyed fingerprint of a private dataset: names it in ledgers and cards, reveals nothing."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

import polars as pl

KEY_FILE = "fingerprint.key"


def load_or_create_key(state_dir: str | Path) -> bytes:
    """The owner's secret key (created once, mode 0600); it never leaves ``state_dir``.

    A plain hash of the data would let anyone holding a candidate dataset test whether it is
    the private one, or brute-force one unknown label; a keyed hash does not.
    """
    path = Path(state_dir) / KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
    return path.read_bytes()


def dataset_fingerprint(table: pl.DataFrame, key: bytes) -> str:
    """HMAC-SHA256 of the records' text fields, in order; 16 bytes in hex."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for row in table.select("prompt", "chosen", "rejected").iter_rows():
        for text in row:
            data = text.encode("utf-8")
            mac.update(len(data).to_bytes(8, "little"))
            mac.update(data)
    return mac.hexdigest()[:32]
