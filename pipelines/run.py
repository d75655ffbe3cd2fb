"""Run the synthesis pipeline from a YAML config (default: the offline CPU demo).

Usage::

    python -m pipelines.run [--config pipelines/configs/demo.yaml] [--out DIR]

Steps, each cached by a signature of its inputs and settings (a rerun resumes; a changed late
step reruns only what follows): ``prompts`` -> ``generate`` (checkpointed in shards) ->
``embed`` -> ``fit`` (the only step that reads private records; a cache miss is new spending,
checked against the dataset's lifetime budget under a lock) -> ``select`` -> ``export``.

Exit codes: 0 done; 2 bad config; 3 privacy budget refused; 4 bad input data (a bad record, or
a private dataset too small for its epsilon); 5 another run holds the budget lock; 1 anything
else.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
from pydantic import ValidationError

from dpprefsyn.errors import BudgetError, DataError, DatasetTooSmallError
from dpprefsyn.privacy.budget_store import BudgetLockedError
from pipelines.config import PipelineConfig
from pipelines.runner import Runner, StepResult

DEFAULT_CONFIG = Path(__file__).resolve().parent / "configs" / "demo.yaml"
EXIT = {"ok": 0, "error": 1, "config": 2, "budget": 3, "data": 4, "locked": 5}
log = logging.getLogger("pipelines.run")


def _file_digest(path: str) -> str | None:
    import hashlib

    p = Path(path)
    if not p.is_file():
        return None
    return hashlib.sha1(p.read_bytes()).hexdigest()


def step_prompts(cfg: PipelineConfig, runner: Runner) -> StepResult:
    from dpprefsyn.synth.prompts import load_prompts

    payload = [{**s.model_dump(), "digest": _file_digest(s.path)} for s in cfg.prompts]

    def fn(folder: Path) -> dict:
        tables, dropped = [], {}
        for src in cfg.prompts:
            ps = load_prompts(
                src.path, format=src.format, columns=src.columns, split=src.split, limit=src.limit
            )
            t = ps.table
            if src.exclude_datasets and "dataset" in t.columns:
                before = len(t)
                t = t.filter(~pl.col("dataset").is_in(src.exclude_datasets))
                dropped["excluded_dataset"] = dropped.get("excluded_dataset", 0) + before - len(t)
            for k, v in ps.dropped.items():
                dropped[k] = dropped.get(k, 0) + v
            tables.append(t.select("prompt_id", "prompt", "source"))
        table = pl.concat(tables)
        before = len(table)
        table = table.unique(subset="prompt", keep="first", maintain_order=True)
        if before > len(table):
            dropped["duplicate_across_sources"] = before - len(table)
        table.write_parquet(folder / "prompts.parquet")
        sources = [s.path for s in cfg.prompts]
        return {"n_prompts": len(table), "dropped": dropped, "sources": sources}

    return runner.run("prompts", payload, fn)


def make_generator(cfg: PipelineConfig):
    from dpprefsyn.synth.backends import make_backend

    g = cfg.generation
    settings = {"vllm": g.vllm, "transformers": g.transformers, "pool": g.pool}
    if g.backend == "auto":
        return make_backend("auto", cpu_fallback=g.cpu_fallback, **settings)
    return make_backend(g.backend, **settings[g.backend])


def step_generate(cfg: PipelineConfig, runner: Runner, prompts: StepResult) -> StepResult:
    from tqdm.auto import tqdm

    backend = make_generator(cfg)
    g = cfg.generation
    payload = {
        "prompts": prompts.signature,
        "backend": backend.name,
        "settings": backend.signature(),
        "n": g.n,
        "seed": g.seed,
        "shard_size": g.shard_size,
    }

    def fn(folder: Path) -> dict:
        table = pl.read_parquet(prompts.path / "prompts.parquet")
        shards = folder / "shards"
        shards.mkdir(exist_ok=True)
        n_shards = max(1, -(-len(table) // g.shard_size))
        todo = [i for i in range(n_shards) if not (shards / f"{i:05d}.jsonl").exists()]
        if todo:
            backend.load()
        for i in tqdm(todo, desc="generate (shards)", disable=not todo):
            part = table.slice(i * g.shard_size, g.shard_size)
            out = backend.generate(part["prompt"].to_list(), n=g.n, seed=g.seed)
            lines = [
                json.dumps(
                    {
                        "prompt_id": pid,
                        "candidates": [[c.text, c.generator] for c in cands],
                    }
                )
                for pid, cands in zip(part["prompt_id"].to_list(), out, strict=True)
            ]
            tmp = shards / f"{i:05d}.tmp"
            tmp.write_text("".join(line + "\n" for line in lines))
            tmp.replace(shards / f"{i:05d}.jsonl")  # atomic: a killed run never leaves half a shard
        n_cands = sum(
            len(json.loads(line)["candidates"])
            for f in sorted(shards.glob("*.jsonl"))
            for line in f.read_text().splitlines()
        )
        return {"backend": backend.name, "n_shards": n_shards, "n_candidates": n_cands}

    return runner.run("generate", payload, fn)


def read_candidates(generated: StepResult) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for f in sorted((generated.path / "shards").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            out[rec["prompt_id"]] = [tuple(c) for c in rec["candidates"]]
    return out


def _fitted_embedder_info(cfg: PipelineConfig) -> dict:
    """How candidates must be embedded: as the given model was, or as this run's fit will."""
    if cfg.model is not None:
        meta = json.loads((cfg.model / "model.json").read_text())
        return {**meta["embedder"], "routed": meta.get("routing") == "prompt"}
    fit = cfg.fit_config()
    return {
        "embedding_model": fit.embedding_model,
        "max_seq_length": fit.max_seq_length,
        "template": fit.template,
        "routed": fit.clustering != "none" and fit.cluster_on == "prompt",
    }


def _embedder(cfg: PipelineConfig):
    from dpprefsyn.embedding import Embedder

    info = _fitted_embedder_info(cfg)
    if cfg.model is not None:
        return Embedder.for_fitted(info, cache_dir=cfg.cache_dir)
    return Embedder(
        info["embedding_model"], max_seq_length=info["max_seq_length"], cache_dir=cfg.cache_dir
    )


def step_embed(
    cfg: PipelineConfig, runner: Runner, prompts: StepResult, generated: StepResult
) -> StepResult:
    from dpprefsyn.templates import get_template

    info = _fitted_embedder_info(cfg)
    routed = info["routed"]
    payload = {"generate": generated.signature, **info}

    def fn(folder: Path) -> dict:
        table = pl.read_parquet(prompts.path / "prompts.parquet")
        cands = read_candidates(generated)
        texts, owners, cprompts = [], [], []
        for row, (pid, prompt) in enumerate(table.select("prompt_id", "prompt").iter_rows()):
            for text, _ in cands.get(pid, []):
                texts.append(text)
                owners.append(row)
                cprompts.append(prompt)
        emb = _embedder(cfg)
        vecs = emb.encode_pairs(cprompts, texts, get_template(info["template"]))
        np.save(folder / "candidates.npy", vecs.astype(np.float32))
        np.save(folder / "owners.npy", np.asarray(owners, dtype=np.int64))
        if routed:  # prompt embeddings are only read to route prompts to clusters
            prompt_vecs = emb.encode(table["prompt"].to_list())
            np.save(folder / "prompts.npy", prompt_vecs.astype(np.float32))
        return {"n_embedded": len(texts), "embedder": emb.model_id}

    return runner.run("embed", payload, fn)


def step_fit(cfg: PipelineConfig, runner: Runner, embedded: StepResult) -> StepResult:
    """The privacy boundary: reads private records, writes the preference model."""
    from dpprefsyn.loaders import load_preferences
    from dpprefsyn.private.budgeted import data_fingerprint

    fit = cfg.fit_config()
    data = load_preferences(
        cfg.private.path,
        format=cfg.private.format,
        split=cfg.private.split,
        on_error=cfg.private.on_error,
    )
    fingerprint = data_fingerprint(data, cfg.state_dir)
    public = embedded.signature if fit.projection == "public" else None
    payload = {"data": fingerprint, "fit": fit.to_dict(), "public": public}

    def fn(folder: Path) -> dict:
        from dpprefsyn.private.budgeted import budgeted_fit
        from dpprefsyn.public_pool import pool_differences

        public_diffs = None
        if fit.projection == "public":
            vecs = np.load(embedded.path / "candidates.npy")
            owners = np.load(embedded.path / "owners.npy")
            public_diffs = pool_differences(vecs, owners.tolist())
        model = budgeted_fit(
            data,
            fit,
            state_dir=cfg.state_dir,
            fingerprint=fingerprint,
            lifetime_epsilon=cfg.budget.lifetime_epsilon,
            lifetime_delta=cfg.budget.lifetime_delta,
            lock_timeout=cfg.budget.lock_timeout_s,
            run=cfg.name,
            embedder=_embedder(cfg),
            public_differences=public_diffs,
            on_error=cfg.private.on_error,
        )
        model.save(folder / "model")
        # Exact counts of the private data are for the operator's eyes: printed, never written.
        print(
            f"private data: {data.n_read} records read, dropped {data.dropped or 'none'} "
            "(exact counts, not written to any output)",
            file=sys.stderr,
        )
        total = model.privacy_report["total"]
        return {"fingerprint": fingerprint, "epsilon": total["epsilon"], "delta": total["delta"]}

    return runner.run("fit", payload, fn)


def step_load_model(cfg: PipelineConfig, runner: Runner) -> StepResult:
    """Take a model fitted elsewhere: no private record is read and nothing is spent here."""
    import shutil

    from dpprefsyn.artifact import PreferenceModel

    files = sorted(p for p in cfg.model.iterdir() if p.is_file())
    payload = {"model": {p.name: _file_digest(str(p)) for p in files}}

    def fn(folder: Path) -> dict:
        model = PreferenceModel.load(cfg.model)  # validates it before anything is built on it
        shutil.copytree(cfg.model, folder / "model")
        total = model.privacy_report["total"]
        return {
            "fingerprint": model.privacy_report.get("private_data_fingerprint"),
            "epsilon": total["epsilon"],
            "delta": total["delta"],
            "given": True,
        }

    return runner.run("fit", payload, fn)


def step_select(
    cfg: PipelineConfig,
    runner: Runner,
    prompts: StepResult,
    generated: StepResult,
    embedded: StepResult,
    fitted: StepResult,
) -> StepResult:
    from dpprefsyn.artifact import PreferenceModel
    from dpprefsyn.synth.select import select_pairs

    payload = {
        "fit": fitted.signature,
        "embed": embedded.signature,
        "selection": cfg.selection.model_dump(),
    }

    def fn(folder: Path) -> dict:
        model = PreferenceModel.load(fitted.path / "model")
        table = pl.read_parquet(prompts.path / "prompts.parquet")
        cands = read_candidates(generated)
        vecs = np.load(embedded.path / "candidates.npy")
        owners = np.load(embedded.path / "owners.npy")
        by_row: dict[int, np.ndarray] = {}
        if len(owners):
            starts = np.flatnonzero(np.r_[True, np.diff(owners) != 0])
            for s, block in zip(starts, np.split(vecs, starts[1:]), strict=True):
                by_row[int(owners[s])] = block
        d = vecs.shape[1] if len(vecs) else model.projection.shape[1]
        ids = table["prompt_id"].to_list()
        routes = embedded.path / "prompts.npy"
        sel = select_pairs(
            model,
            ids,
            table["prompt"].to_list(),
            table["source"].to_list(),
            [cands.get(pid, []) for pid in ids],
            [by_row.get(i, np.empty((0, d))) for i in range(len(ids))],
            min_gap=cfg.selection.min_gap,
            prompt_embeddings=np.load(routes) if routes.exists() else None,
            rng=np.random.default_rng(cfg.selection.seed),
        )
        sel.pairs.write_parquet(folder / "pairs.parquet")
        gaps = sel.gaps
        return {
            "n_pairs": len(sel.pairs),
            "dropped": sel.dropped,
            "gap_quantiles": np.quantile(gaps, [0.1, 0.5, 0.9]).tolist() if len(gaps) else [],
        }

    return runner.run("select", payload, fn)


def step_export(cfg: PipelineConfig, selected: StepResult, fitted: StepResult, prompts) -> Path:
    """Write the dataset unless the same pairs were already exported with the same settings."""
    import os

    marker = cfg.out_dir / ".export.json"
    stamp = {"select": selected.signature, "export": cfg.export.model_dump()}
    if (
        marker.exists()
        and json.loads(marker.read_text()) == stamp
        and (cfg.out_dir / "dataset").is_dir()
        and not cfg.export.push_to_hub
    ):
        return cfg.out_dir
    from dpprefsyn.synth.export import export_dataset

    report = json.loads((fitted.path / "model" / "privacy_report.json").read_text())
    meta = json.loads((fitted.path / "model" / "model.json").read_text())
    token = os.environ.get(cfg.export.token_env) if cfg.export.push_to_hub else None
    out = export_dataset(
        pl.read_parquet(selected.path / "pairs.parquet"),
        cfg.out_dir,
        report=report,
        dropped=selected.info["dropped"],
        prompt_sources=prompts.info["sources"],
        private_fingerprint=fitted.info["fingerprint"],
        style=cfg.export.style,
        formats=cfg.export.formats,
        push_to_hub=cfg.export.push_to_hub,
        token=token,
        model_meta=meta,
    )
    marker.write_text(json.dumps(stamp))
    return out


def run_pipeline(cfg: PipelineConfig) -> dict:
    """Run every step; return the summary (also written to ``out_dir/summary.json``)."""
    start = time.perf_counter()
    runner = Runner(cfg.out_dir)
    prompts = step_prompts(cfg, runner)
    generated = step_generate(cfg, runner, prompts)
    embedded = step_embed(cfg, runner, prompts, generated)
    if cfg.model is not None:
        fitted = step_load_model(cfg, runner)
    else:
        fitted = step_fit(cfg, runner, embedded)
    selected = step_select(cfg, runner, prompts, generated, embedded, fitted)
    t = time.perf_counter()
    out = step_export(cfg, selected, fitted, prompts)
    given = fitted.info.get("given", False)
    spent = None
    if not given:
        from dpprefsyn.private.budgeted import lifetime_spent

        spent, _ = lifetime_spent(cfg.state_dir, fitted.info["fingerprint"])
    summary = {
        "dataset": str(out / "dataset"),
        "pairs_written": selected.info["n_pairs"],
        "pairs_dropped": selected.info["dropped"],
        "prompts_dropped": prompts.info["dropped"],
        "epsilon_this_run": 0.0 if fitted.cached or given else fitted.info["epsilon"],
        "fit_epsilon": fitted.info["epsilon"],
        "fit_delta": fitted.info["delta"],
        "model_given": given,
        "lifetime_epsilon_spent": spent,
        "lifetime_epsilon_remaining": None if given else cfg.budget.lifetime_epsilon - spent,
        "steps": {
            r.name: {"cached": r.cached, "seconds": round(r.seconds, 2)} for r in runner.results
        },
        "export_seconds": round(time.perf_counter() - t, 2),
        "total_seconds": round(time.perf_counter() - start, 2),
    }
    if cfg.demo_truth is not None:
        from pipelines.demo_eval import evaluate_demo

        summary["demo"] = evaluate_demo(selected.path / "pairs.parquet", generated, cfg.demo_truth)
    (cfg.out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def print_summary(s: dict) -> None:
    print("\n== dpprefsyn run summary ==")
    print(f"dataset:        {s['dataset']}")
    print(f"pairs written:  {s['pairs_written']}")
    print(f"pairs dropped:  {s['pairs_dropped'] or 'none'}")
    print(f"prompts dropped:{' ' + str(s['prompts_dropped']) if s['prompts_dropped'] else ' none'}")
    lifetime = (
        "lifetime budget kept by the data owner (model given)"
        if s["model_given"]
        else f"lifetime spent {s['lifetime_epsilon_spent']:.4g}, "
        f"remaining {s['lifetime_epsilon_remaining']:.4g}"
    )
    print(
        f"privacy:        epsilon spent this run {s['epsilon_this_run']:.4g} "
        f"(model: epsilon={s['fit_epsilon']:.4g}, delta={s['fit_delta']:.3g}); {lifetime}"
    )
    steps = ", ".join(
        f"{k} " + ("cached" if v["cached"] else f"{v['seconds']}s") for k, v in s["steps"].items()
    )
    print(f"steps:          {steps}; export {s['export_seconds']}s; total {s['total_seconds']}s")
    if "demo" in s:
        d = s["demo"]
        print(
            f"demo:           agreement with true group taste {d['agreement']:.3f}; "
            f"cluster mix vs true mix (total variation) {d['mix_total_variation']:.3f}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    ap.add_argument("--out", type=Path, default=None, help="override out_dir")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    try:
        cfg = PipelineConfig.from_yaml(args.config)
        if args.out is not None:
            cfg.out_dir = args.out
    except (ValidationError, ValueError, FileNotFoundError) as err:
        print(f"config error ({args.config}):\n{err}", file=sys.stderr)
        return EXIT["config"]
    try:
        summary = run_pipeline(cfg)
    except BudgetError as err:
        print(f"privacy budget refused: {err}", file=sys.stderr)
        return EXIT["budget"]
    except BudgetLockedError as err:
        print(f"locked: {err}", file=sys.stderr)
        return EXIT["locked"]
    except DatasetTooSmallError as err:
        print(f"refused: {err}", file=sys.stderr)
        return EXIT["data"]
    except DataError as err:
        print(f"bad input: {err}", file=sys.stderr)
        return EXIT["data"]
    print_summary(summary)
    return EXIT["ok"]


if __name__ == "__main__":
    sys.exit(main())
