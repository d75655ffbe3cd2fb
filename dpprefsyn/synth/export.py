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


def _mechanism(release: dict[str, Any]) -> str:
    """One release in plain words: what was noised, and how."""
    stage, mechanism = release["stage"], release["mechanism"]
    params = release.get("params") or {}
    if stage == "count":
        return (
            "the number of records, with Laplace noise (sensitivity 1); it sets delta and "
            "decides whether the data are large enough for the budget"
        )
    if stage == "pca":
        return "DP-PCA: Gaussian noise on the second-moment matrix of the preference vectors"
    if stage == "cluster" and mechanism == "pure":
        return (
            "diffprivlib's k-means: Laplace noise on each iteration's cluster sums and sizes, "
            "drawn from secrets.SystemRandom unless a fixed seed was set"
        )
    if stage == "cluster":
        return "spherical k-means: Gaussian noise on each iteration's cluster sums and sizes"
    if stage == "histogram":
        return "the number of records in each cluster, with Gaussian noise (empty ones too)"
    if mechanism == "subsampled_gaussian":
        return (
            "DP-SGD on each cluster's reward: per-record clipped gradients, Poisson-sampled "
            "batches and Gaussian noise at every step (PRV accountant)"
        )
    if params.get("estimator") == "dp-mean":
        return "each cluster's sum of preference vectors, with Gaussian noise"
    if stage == "reward":
        return (
            "each cluster's first and second moments of the preference vectors, with Gaussian "
            "noise (one Newton step of a Bradley-Terry reward)"
        )
    return f"{mechanism} mechanism"


def privacy_section(
    report: dict[str, Any],
    *,
    prompt_sources: Sequence[str] = (),
    generators: Sequence[str] = (),
    model_meta: dict[str, Any] | None = None,
) -> str:
    """The card's section for a privacy officer, in plain words, from the privacy report.

    It says what is protected, what was spent, by which mechanisms and how they compose, what
    is assumed public, where the noise comes from, and what the guarantee does not cover.
    """
    total = report["total"]
    eps, delta = total["epsilon"], total["delta"]
    budget = report.get("budget", {})
    meta = model_meta or {}
    config = meta.get("config", {})
    embedder = meta.get("embedder", {}).get("embedding_model") or meta.get("embedder", {}).get(
        "model"
    )
    asked = f" (of a budget of epsilon={budget['epsilon']:.4g})" if "epsilon" in budget else ""
    if report.get("delta_from_noisy_count"):
        delta_how = "delta was set to 1/n~ from the noisy count, never from the exact one"
    else:
        delta_how = "delta was set by the operator"
    if report.get("delta_note"):
        delta_how += f"; {report['delta_note']}"
    seen: dict[str, None] = {}
    for r in report["releases"]:
        seen.setdefault(f"- `{r['stage']}`: {_mechanism(r)}.", None)
    mechanisms = "\n".join(seen)
    gens = ", ".join(sorted(set(generators))) or "none recorded"
    noise = report.get("noise_source", "unspecified")
    if "insecure" in noise:
        noise = (
            f"{noise}. **The noise came from a fixed seed: whoever knows it can subtract the "
            "noise, so in practice this dataset has no guarantee.** Numbers below are "
            "what the same fit with fresh noise would give"
        )
    else:
        noise = f"Drawn from {noise}"
    pool = (
        ", the public candidate pool the projection is fitted on"
        if config.get("projection_used") == "public"
        else ""
    )
    preset_caveat = ""
    dpl = [r for r in report["releases"] if r["stage"] == "cluster" and r["mechanism"] == "pure"]
    if dpl and "n_iter" not in (dpl[0].get("params") or {}):
        preset_caveat = (
            "\n- **The paper preset's k-means** (a model fitted before dpprefsyn fixed it): "
            "diffprivlib 0.6.6 chose its number of iterations from the exact number of records "
            "and spent more than its stated epsilon on each iteration. Refit the model."
        )
    return f"""## Privacy statement for a privacy officer

**What is protected.** Every field of every private record: the prompt, the chosen
response, the rejected response and the preference label (which of the two was preferred).
The unit of protection is one record. Neighbouring relation:
{report["neighbouring_relation"]}.

**What was spent.** epsilon={eps:.4g}{asked}, delta={delta:.3g}: the whole guarantee of the
one private fit this dataset comes from. {delta_how[0].upper() + delta_how[1:]}. Choosing the
pairs and writing this dataset are post-processing of that fit and spend nothing more.

**Mechanisms.** Each value learned from the private records is one of these releases or
computed from them:

{mechanisms}

**Composition.** {report["composition"]} The table below lists each release with its
standalone cost; the total above is their composition, not their sum.

**Assumed public.** The guarantee treats as public, and so does not protect: the embedding
model ({embedder or "as recorded in model.json"}), the generators of the candidate responses
({gens}), the public prompt sources ({", ".join(prompt_sources) or "none recorded"}){pool}
and the software. If private records
are also in any of these (for example in a pretrained model's training data), they are not
protected by this guarantee.

**Noise source.** {noise}. numpy's PCG64 is not itself a cryptographic generator; only
noisy aggregates are released, never its raw output. The proofs assume exact real-valued
Gaussian and Laplace noise; the noise is sampled in 64-bit floating point, whose uneven
spacing can in principle leak the low-order bits (Mironov, CCS 2012). No snapping or discrete
mechanism is used, as in opacus's default mode: the guarantee is the textbook one, not a
floating-point-exact one.

**Not covered.**

- **Other runs**: this card states one fit. Every new fit of the same private data spends
  again; the lifetime total is tracked only in the operator's `state_dir`
  (`budgets/<fingerprint>.json`), which this card cannot see. A fit refused as too small
  spends its noisy count too.
- **People, not records**: a person who contributed k records is protected at about k times
  epsilon (and a larger delta), not at epsilon.
- **Public data leakage**: anything private inside the public prompts, candidates or
  pretrained models (see above).
- **Side channels**: running time, memory use, the sizes of intermediate files and whether a
  run failed are not protected; run the fit where only the operator observes them.
- **The operator's console**: the pipeline prints the exact numbers of private records read
  and dropped for the operator. They are not differentially private, are written to no
  output, and must not be shared.
- **Storage**: the private data, the embedding cache (vectors of private texts) and
  `state_dir` must be protected by their owner.{preset_caveat}
"""


def dataset_card(
    report: dict[str, Any],
    *,
    n_pairs: int,
    dropped: dict[str, int],
    prompt_sources: Sequence[str],
    generators: Sequence[str],
    private_fingerprint: str | None,
    style: str,
    model_meta: dict[str, Any] | None = None,
) -> str:
    """Markdown card that states the guarantee in plain words (and its limits).

    ``model_meta`` is the model's ``model.json`` (embedder and fit configuration), named in
    the privacy statement when given.
    """
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
    statement = privacy_section(
        report, prompt_sources=prompt_sources, generators=generators, model_meta=model_meta
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

Private data fingerprint: {fingerprint}.

Every value learned from the private data is one of these releases or computed from them:

| stage | mechanism | epsilon (standalone) | delta |
|---|---|---|---|
{releases}

The prompts and candidate responses are public; only the choice of `chosen` and `rejected`
comes from the private preference model, as post-processing (no further privacy cost).

{statement}
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
    model_meta: dict[str, Any] | None = None,
) -> Path:
    """Write ``out_dir/dataset`` (``save_to_disk``), the card and the privacy report.

    ``formats`` may add ``"parquet"`` and ``"jsonl"`` files; ``push_to_hub`` (a repo id) with
    ``token`` uploads the dataset and its card. ``model_meta`` (the model's ``model.json``)
    lets the card name the embedder and the fit configuration.
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
            model_meta=model_meta,
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
