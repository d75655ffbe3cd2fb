"""Publish synthetic pairs as a Hugging Face dataset in TRL's preference format, with a card."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import polars as pl

from dpprefsyn import __version__

DATASET_DIR = "dataset"
CARD_FILE = "README.md"
REPORT_FILE = "privacy_report.json"


def to_trl(pairs: pl.DataFrame, style: Literal["standard", "conversational"]) -> pl.DataFrame:
    """``prompt/chosen/rejected`` as strings, or as message lists (TRL conversational)."""
    if style == "standard":
        return pairs
    return pairs.with_columns(
        pl.col("prompt").map_elements(
            lambda t: [{"role": "user", "content": t}],
            return_dtype=pl.List(pl.Struct({"role": pl.Utf8, "content": pl.Utf8})),
        ),
        *(
            pl.col(c).map_elements(
                lambda t: [{"role": "assistant", "content": t}],
                return_dtype=pl.List(pl.Struct({"role": pl.Utf8, "content": pl.Utf8})),
            )
            for c in ("chosen", "rejected")
        ),
    )


def dataset_card(
    report: dict[str, Any],
    *,
    n_pairs: int,
    dropped: dict[str, int],
    prompt_sources: Sequence[str],
    generators: Sequence[str],
    private_fingerprint: str | None,
    style: str,
) -> str:
    """Markdown card that states the guarantee in plain words (and its limits)."""
    total = report["total"]
    releases = "\n".join(
        f"| {r['stage']} | {r['mechanism']} | {r['epsilon']:.4g} | {r['delta']:.3g} |"
        for r in report["releases"]
    )
    drops = ", ".join(f"{k}: {v}" for k, v in sorted(dropped.items())) or "none"
    fingerprint = (
        f"`{private_fingerprint}` (a keyed hash: it identifies the private dataset to its owner "
        "and reveals nothing of its content)"
        if private_fingerprint
        else "not recorded"
    )
    return f"""---
license: other
task_categories:
- text-generation
tags:
- dpo
- preference
- differential-privacy
- synthetic
pretty_name: DP synthetic preference data (dpprefsyn)
---

# Differentially private synthetic preference data

{n_pairs} preference pairs in TRL's {style} preference format (`prompt`, `chosen`,
`rejected`), made by dpprefsyn {__version__}. Load it with `datasets.load_from_disk` (or
`load_dataset` after a push) and train with TRL's `DPOTrainer` as is.

## Privacy guarantee

This dataset is **({total["epsilon"]:.3g}, {total["delta"]:.3g})-differentially private** with
respect to the private preference data it was learned from: adding or removing any one
private record (its prompt, both responses and which one was preferred) changes the
probability of producing this dataset by at most a factor e^{total["epsilon"]:.3g}, except with
probability {total["delta"]:.3g}.

- Neighbouring relation: {report["neighbouring_relation"]}.
- Composition: {report["composition"]}
- Noise: {report.get("noise_source", "unspecified")}.
- Private data fingerprint: {fingerprint}.

Every value learned from the private data is one of these releases or computed from them:

| stage | mechanism | epsilon (standalone) | delta |
|---|---|---|---|
{releases}

The prompts and candidate responses are public; only the choice of `chosen` and `rejected`
comes from the private preference model, as post-processing (no further privacy cost).

**Not covered**: the public prompt sources and generators are assumed public. The guarantee
protects records, not people with many records: a person who contributed k records is
protected at k times epsilon. It says nothing about the private data's storage, nor about
the embedding cache of the fit, which holds vectors of private texts.

## Provenance

- Public prompt sources: {", ".join(prompt_sources) or "none"}
- Candidate generators: {", ".join(sorted(set(generators))) or "none"}
- Pairs dropped: {drops}
- `privacy_report.json` beside this card lists every release and its parameters.
"""


def export_dataset(
    pairs: pl.DataFrame,
    out_dir: str | Path,
    *,
    report: dict[str, Any],
    dropped: dict[str, int],
    prompt_sources: Sequence[str],
    private_fingerprint: str | None = None,
    style: Literal["standard", "conversational"] = "standard",
    formats: Sequence[str] = (),
    push_to_hub: str | None = None,
    token: str | None = None,
) -> Path:
    """Write ``out_dir/dataset`` (``save_to_disk``), the card and the privacy report.

    ``formats`` may add ``"parquet"`` and ``"jsonl"`` files; ``push_to_hub`` (a repo id) with
    ``token`` uploads the dataset and its card.
    """
    import datasets
    from huggingface_hub import DatasetCard

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = to_trl(pairs, style)
    ds = datasets.Dataset.from_polars(table)
    target = out / DATASET_DIR
    if target.exists():
        shutil.rmtree(target)
    ds.save_to_disk(str(target))
    generators = [*pairs["generator_chosen"].to_list(), *pairs["generator_rejected"].to_list()]
    card = DatasetCard(
        dataset_card(
            report,
            n_pairs=len(pairs),
            dropped=dropped,
            prompt_sources=prompt_sources,
            generators=generators,
            private_fingerprint=private_fingerprint,
            style=style,
        )
    )
    card.save(str(out / CARD_FILE))
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2, default=str))
    for fmt in formats:
        if fmt == "parquet":
            table.write_parquet(out / "pairs.parquet")
        elif fmt == "jsonl":
            table.write_ndjson(out / "pairs.jsonl")
        else:
            raise ValueError(f"unknown export format {fmt!r}: use 'parquet' or 'jsonl'")
    if push_to_hub:
        if not token:
            raise ValueError("push_to_hub needs a token")
        ds.push_to_hub(push_to_hub, token=token)
        card.push_to_hub(push_to_hub, token=token, repo_type="dataset")
    return out
