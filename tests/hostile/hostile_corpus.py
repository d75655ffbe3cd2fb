"""Hostile input files, written on demand into a test's folder (nothing binary is committed).

Each private file holds good demo records with one bad one planted at a known line, so a test
can check that the error names that record and field. Every text carries :data:`CANARY`, which
must never show up in an error, a log line or an output file.

The public side is a small slice of the demo (a few prompts, eight candidates each), so a
pipeline run embeds a few dozen texts, not hundreds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pipelines.make_demo_data import make

CANARY = "CANARY-h0st1le-private"
BAD_LINE = 3
"""0-based line of the planted record in every private file with one bad record."""

HUGE_BYTES = 10_000_000


def _jsonl(path: Path, rows: list[object]) -> Path:
    lines = [r if isinstance(r, bytes) else json.dumps(r).encode() for r in rows]
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def huge_text(n_bytes: int = HUGE_BYTES) -> str:
    """About ``n_bytes`` of plain words: what a runaway generation or a pasted log looks like."""
    words = "the quick brown fox jumps over the lazy dog again and again "
    return (words * (n_bytes // len(words) + 1))[:n_bytes]


class Demo:
    """A small demo: private records with known tastes and a public slice of prompts.

    Parameters
    ----------
    folder : Path
        Where the files go.
    n_private : int
        Demo records available to :meth:`records`.
    n_prompts : int
        Public prompts kept (with all eight candidates of each).
    """

    def __init__(self, folder: Path, n_private: int = 400, n_prompts: int = 4) -> None:
        self.folder = folder
        make(folder / "demo", n_private=n_private, seed=7)
        rows = (folder / "demo" / "private.jsonl").read_text().splitlines()
        self._records = [json.loads(line) for line in rows]
        for r in self._records:
            r["prompt"] = f"{r['prompt']} {CANARY}"
        prompts = (folder / "demo" / "public_prompts.jsonl").read_text().splitlines()
        self.prompt_rows = [json.loads(line) for line in prompts[:n_prompts]]
        ids = {p["prompt_id"] for p in self.prompt_rows}
        cands = (folder / "demo" / "public_candidates.jsonl").read_text().splitlines()
        self.candidate_rows = [c for c in map(json.loads, cands) if c["prompt_id"] in ids]
        self.prompts = _jsonl(folder / "public_prompts.jsonl", self.prompt_rows)
        self.candidates = _jsonl(folder / "public_candidates.jsonl", self.candidate_rows)

    def records(self, n: int, start: int = 0) -> list[dict[str, str]]:
        """``n`` good private records (copies)."""
        return [dict(r) for r in self._records[start : start + n]]

    def private(self, name: str, rows: list[object]) -> Path:
        """Write private rows (dicts, or raw ``bytes`` lines) as JSON Lines."""
        return _jsonl(self.folder / name, rows)

    def public(self, name: str, rows: list[object]) -> Path:
        """Write public rows (dicts, or raw ``bytes`` lines) as JSON Lines."""
        return _jsonl(self.folder / name, rows)


# --- one bad record among good ones: (file name, make the bad record from a good one) -------


def _missing(r: dict) -> object:
    return {k: v for k, v in r.items() if k != "rejected"}


def _blank(r: dict) -> object:
    return {**r, "chosen": "  \n\t "}


def _identical(r: dict) -> object:
    return {**r, "rejected": r["chosen"]}


def _not_utf8(r: dict) -> object:
    raw = json.dumps({**r, "rejected": "caf\u00e9 " + r["rejected"]}).encode()
    return raw.replace(b"\\u00e9", b"\xe9")  # a Latin-1 byte: invalid UTF-8


def _not_a_string(r: dict) -> object:
    return {**r, "prompt": {"text": r["prompt"]}}


def _case_only(r: dict) -> object:
    # The embedder is uncased and ignores spacing: the two responses embed identically.
    return {**r, "rejected": "  ".join(r["chosen"].upper().split())}


def _huge_twins(r: dict) -> object:
    # Two 10 MB responses that differ only past the embedder's window.
    text = huge_text()
    return {**r, "chosen": text + " yes", "rejected": text + " no"}


BAD_RECORDS: dict[str, tuple[Callable[[dict], object], str, str]] = {
    # name: (make the bad record, field the error names, what the message says)
    "missing_field": (_missing, "rejected", "field is missing"),
    "blank_response": (_blank, "chosen", "empty or whitespace only"),
    "identical": (_identical, "rejected", "identical"),
    "not_utf8": (_not_utf8, "rejected", "not valid UTF-8"),
    "not_a_string": (_not_a_string, "prompt", "expected a string"),
    "case_only": (_case_only, "rejected", "embed identically"),
    "huge_twins": (_huge_twins, "rejected", "embed identically"),
}
"""Private records that must stop a run with an error naming ``<file>:BAD_LINE`` and the field."""


def with_bad_record(demo: Demo, kind: str, n: int = 8) -> Path:
    """``n`` good records with the ``kind`` record planted at :data:`BAD_LINE`."""
    rows: list[object] = demo.records(n)
    make_bad = BAD_RECORDS[kind][0]
    rows[BAD_LINE] = make_bad(rows[BAD_LINE])
    return demo.private(f"{kind}.jsonl", rows)


WHOLE_FILE_CASES: dict[str, bytes] = {
    "empty": b"",
    "whitespace_only": b"\n  \n\t\n",
    "not_json": b"\xff\xfe\x00garbage",
}
"""Private files with no usable record at all."""


def everything_at_once(demo: Demo, n_good: int) -> tuple[Path, dict[str, int]]:
    """Good records with extra fields, a 10 MB response, and every bad kind once (for drop).

    Returns the file and the drop counts the loader must report; the fit drops two more
    records (``case_only`` and ``huge_twins``), whose responses embed identically.
    """
    rows: list[object] = []
    for i, r in enumerate(demo.records(n_good)):
        rows.append({**r, "user_id": i, "meta": {"source": "survey", "score": [1, 2]}})
    rows[0] = {**rows[0], "chosen": huge_text() + " " + rows[0]["chosen"]}
    expected = {
        "missing_field": 1,
        "empty_response": 1,
        "identical_responses": 1,
        "not_utf8": 1,
        "not_a_string": 1,
    }
    bad = demo.records(7, start=n_good)
    rows += [
        _missing(bad[0]),
        _blank(bad[1]),
        _identical(bad[2]),
        _not_utf8(bad[3]),
        _not_a_string(bad[4]),
        # These two pass the loader and are dropped by the fit, once embedded.
        _case_only(bad[5]),
        _huge_twins(bad[6]),
    ]
    return demo.private("everything.jsonl", rows), expected


# --- public prompt files, bad the same ways ---------------------------------------------------


def bad_prompt_files(demo: Demo) -> dict[str, tuple[Path, str, str]]:
    """Public prompt files that must fail: name -> (file, record named, field named)."""
    good = demo.prompt_rows
    files = {}
    cases: dict[str, tuple[object, str]] = {
        "missing_field": ({"prompt_id": "x"}, "prompt"),
        "blank_prompt": ({"prompt_id": "x", "prompt": " \n "}, "prompt"),
        "not_utf8": (b'{"prompt_id": "x", "prompt": "caf\xe9?"}', "prompt"),
        "not_a_string": ({"prompt_id": "x", "prompt": 42}, "prompt"),
    }
    for name, (bad, field) in cases.items():
        rows: list[object] = [*good[:1], bad, *good[1:]]
        path = demo.public(f"prompts_{name}.jsonl", rows)
        files[name] = (path, f"{path.name}:1", field)
    path = demo.public("prompts_empty.jsonl", [])
    files["empty"] = (path, path.name, "<file>")
    return files


def bad_candidate_files(demo: Demo) -> dict[str, tuple[Path, str, str]]:
    """Candidate pool files that must fail: name -> (file, record named, field named)."""
    good = demo.candidate_rows
    first = good[0]
    cases: dict[str, tuple[object, str]] = {
        "missing_field": ({k: v for k, v in first.items() if k != "response"}, "response"),
        "not_utf8": (
            json.dumps({**first, "response": "caf\u00e9"}).encode().replace(b"\\u00e9", b"\xe9"),
            "response",
        ),
        "not_a_string": ({**first, "response": ["a", "list"]}, "response"),
    }
    files = {}
    for name, (bad, field) in cases.items():
        path = demo.public(f"candidates_{name}.jsonl", [first, bad, *good[1:]])
        files[name] = (path, f"{path.name}:1", field)
    return files
