"""Command line: each command loads its inputs, calls one library function, prints the ledger.

Heavy imports (torch, sentence-transformers) happen inside the commands.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer
import yaml

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code)


def _fit_config(config: Path | None, preset: str, overrides: dict):
    from dpprefsyn.private import FitConfig

    fields = yaml.safe_load(config.read_text()) if config else {}
    if not isinstance(fields, dict):
        raise _fail(f"{config}: expected a mapping of FitConfig fields")
    fields.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return FitConfig.paper(**fields) if preset == "paper" else FitConfig(**fields)
    except TypeError as err:
        raise _fail(f"config: {err}") from None
    except ValueError as err:
        raise _fail(f"config: {err}") from None


def _print_report(report: dict) -> None:
    total = report["total"]
    typer.echo(f"privacy: epsilon={total['epsilon']:.4g} delta={total['delta']:.3g}")
    typer.echo(f"neighbouring relation: {report['neighbouring_relation']}")
    for r in report["releases"]:
        extra = f" mu={r['mu']:.4g}" if r["mechanism"] == "gaussian" else ""
        typer.echo(f"  {r['stage']:<10} {r['mechanism']:<20} eps={r['epsilon']:.4g}{extra}")


@app.command()
def fit(
    private: Annotated[str, typer.Option(help="Private preference data: path or hub name.")],
    out: Annotated[Path, typer.Option(help="Directory for the preference model.")],
    epsilon: Annotated[float | None, typer.Option(help="Total privacy budget.")] = None,
    delta: Annotated[float | None, typer.Option(help="Total delta (default 1/n~).")] = None,
    format: Annotated[str, typer.Option(help="Input format, or auto.")] = "auto",
    split: Annotated[str | None, typer.Option(help="Split of a hub dataset.")] = None,
    public_pool: Annotated[
        list[Path] | None,
        typer.Option(
            help="Public candidate files (JSON/JSONL prompt+response) for a free projection."
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="YAML with FitConfig fields.")] = None,
    preset: Annotated[str, typer.Option(help="default or paper.")] = "default",
    on_error: Annotated[str, typer.Option(help="raise or drop malformed records.")] = "raise",
    cache_dir: Annotated[Path | None, typer.Option(help="Embedding cache (private!).")] = None,
    insecure_seed: Annotated[int | None, typer.Option(help="Fix the noise (tests only).")] = None,
    state_dir: Annotated[
        Path,
        typer.Option(
            help="Owner-side state: fingerprint key and lifetime budget logs.",
            envvar="DPPREFSYN_STATE_DIR",
        ),
    ] = Path(".dpprefsyn"),
    lifetime_epsilon: Annotated[
        float, typer.Option(help="Total epsilon over every fit of this dataset.")
    ] = 10.0,
) -> None:
    """Fit the private preference model (the only command that reads private records).

    Each fit spends from the dataset's lifetime budget in ``state_dir``; running the same fit
    into the same ``out`` again reuses the model and spends nothing.
    """
    from dpprefsyn.embedding import Embedder
    from dpprefsyn.errors import BudgetError, DataError
    from dpprefsyn.loaders import load_preferences
    from dpprefsyn.privacy.budget_store import BudgetLockedError
    from dpprefsyn.private.budgeted import budgeted_fit, data_fingerprint, lifetime_spent

    cfg = _fit_config(
        config, preset, {"epsilon": epsilon, "delta": delta, "insecure_seed": insecure_seed}
    )
    try:
        data = load_preferences(private, format=format, on_error=on_error, split=split)
    except (DataError, FileNotFoundError, ValueError) as err:
        raise _fail(str(err)) from None
    typer.echo(f"loaded {len(data)} private pairs ({data.format}); dropped {data.dropped or 0}")
    fingerprint = data_fingerprint(data, state_dir)
    signature = _fit_signature(fingerprint, cfg.to_dict(), public_pool or [])
    stamp = out / FIT_STAMP
    if stamp.is_file() and json.loads(stamp.read_text()) == signature:
        report = json.loads((out / "privacy_report.json").read_text())
        _print_report(report)
        typer.echo(f"{out} already holds this fit of this dataset: reused, nothing spent")
        return
    embedder = Embedder(cfg.embedding_model, max_seq_length=cfg.max_seq_length, cache_dir=cache_dir)
    try:
        public_differences = None
        if public_pool:
            public_differences = _public_differences(public_pool, embedder, cfg.template)
        model = budgeted_fit(
            data,
            cfg,
            state_dir=state_dir,
            fingerprint=fingerprint,
            lifetime_epsilon=lifetime_epsilon,
            run=f"dpprefsyn fit --out {out}",
            embedder=embedder,
            public_differences=public_differences,
            on_error=on_error,
        )
    except (BudgetError, BudgetLockedError) as err:
        raise _fail(str(err), code=3) from None
    except (FileNotFoundError, ValueError) as err:
        # DataError and DatasetTooSmallError are ValueErrors: one line, no traceback.
        raise _fail(str(err)) from None
    model.save(out)
    stamp.write_text(json.dumps(signature))
    _print_report(model.privacy_report)
    spent, _ = lifetime_spent(state_dir, fingerprint)
    typer.echo(f"lifetime epsilon of this dataset: {spent:.4g} spent of {lifetime_epsilon:.4g}")
    typer.echo(f"preference model written to {out}")


FIT_STAMP = "fit_signature.json"
"""Written beside a model by ``fit``: what it was fitted from, so the same fit is reused."""


def _fit_signature(fingerprint: str, config: dict, public_pool: list[Path]) -> dict:
    """The keyed data fingerprint, the settings and the public files' digests (no private text)."""
    import hashlib

    return {
        "data": fingerprint,
        "config": json.loads(json.dumps(config, default=str)),
        "public_pool": {
            str(p): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
            for p in public_pool
        },
    }


def _public_differences(paths: list[Path], embedder, template: str):
    from dpprefsyn.public_pool import pool_differences, read_candidate_pool
    from dpprefsyn.templates import get_template

    prompts, responses = read_candidate_pool(paths)
    emb = embedder.encode_pairs(prompts, responses, get_template(template))
    return pool_differences(emb, prompts)


@app.command("eval-reward")
def eval_reward(
    model: Annotated[Path, typer.Option(help="Preference model directory.")],
    pairs: Annotated[str, typer.Option(help="Held-out preference pairs: path or hub name.")],
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the result here.")] = None,
    format: Annotated[str, typer.Option(help="Input format, or auto.")] = "auto",
    split: Annotated[str | None, typer.Option(help="Split of a hub dataset.")] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Embedding cache.")] = None,
) -> None:
    """Label-blind accuracy of the model's rewards on held-out pairs (ties count one half)."""
    from dpprefsyn.artifact import PreferenceModel
    from dpprefsyn.errors import DataError
    from dpprefsyn.evaluation import label_blind_accuracy
    from dpprefsyn.loaders import load_preferences

    try:
        pm = PreferenceModel.load(model)
        data = load_preferences(pairs, format=format, split=split)
    except (DataError, FileNotFoundError, ValueError) as err:
        raise _fail(str(err)) from None
    embedder, template = _model_embedder(pm, cache_dir)
    t = data.table
    prompts = t["prompt"].to_list()
    chosen = embedder.encode_pairs(prompts, t["chosen"].to_list(), template)
    rejected = embedder.encode_pairs(prompts, t["rejected"].to_list(), template)
    result = label_blind_accuracy(pm, chosen, rejected).to_dict()
    typer.echo(json.dumps(result))
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))


@app.command()
def winrate(
    policy: Annotated[str, typer.Option(help="Policy: model name or folder, or its answers file.")],
    baseline: Annotated[
        str,
        typer.Option(help="Baseline: model name or folder, or an answers file (AlpacaEval...)."),
    ],
    judge: Annotated[str, typer.Option(help="Judge causal LM (an instruct model): name or path.")],
    prompts: Annotated[str, typer.Option(help="Public prompts: a file, folder or hub name.")],
    out: Annotated[Path, typer.Option(help="Directory for records.jsonl and summary.json.")],
    n: Annotated[int | None, typer.Option(help="Judge the first N prompts only.")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML with WinRateConfig fields.")] = None,
) -> None:
    """Win rate of a policy against a baseline, judged by a local model in both orders."""
    from dpprefsyn.errors import DataError
    from dpprefsyn.synth.prompts import load_prompts
    from dpprefsyn.train.winrate import WinRateConfig, win_rate

    fields = yaml.safe_load(config.read_text()) if config else {}
    if not isinstance(fields, dict):
        raise _fail(f"{config}: expected a mapping of WinRateConfig fields")
    try:
        cfg = WinRateConfig(**fields)
        prompt_set = load_prompts(prompts, limit=n)
        report = win_rate(prompt_set, policy, baseline, judge, out, config=cfg)
    except (DataError, OSError, TypeError, ValueError) as err:
        raise _fail(str(err)) from None
    s = report.summary
    low, high = s["ci"]
    typer.echo(
        f"win rate {s['win_rate']:.3f} ({s['confidence']:.0%} CI {low:.3f}-{high:.3f}) over "
        f"{s['n']} prompts: {s['wins']} wins, {s['ties']} ties, {s['losses']} losses"
    )
    typer.echo(s["lengths"]["note"])
    typer.echo(f"records and summary written to {out}")


TRAIN_KINDS = ("sft", "privsft", "dpo", "privdpo", "ppo")


@app.command()
def train(
    kind: Annotated[str, typer.Argument(help="sft, privsft, dpo, privdpo or ppo.")],
    data: Annotated[str, typer.Option(help="Preference pairs (ppo: their prompts).")],
    model: Annotated[str, typer.Option(help="Causal LM to fine-tune: name or path.")],
    out: Annotated[Path, typer.Option(help="Directory for the trained model.")],
    epsilon: Annotated[
        float | None, typer.Option(help="Label epsilon of one pass (privdpo).")
    ] = None,
    reward_model: Annotated[
        Path | None, typer.Option(help="Private preference model (ppo reward).")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="YAML with trainer config fields.")] = None,
) -> None:
    """Fine-tune a model on (synthetic) preference data; ppo uses the private reward."""
    if kind not in TRAIN_KINDS:
        raise _fail(f"unknown kind {kind!r}: choose one of {', '.join(TRAIN_KINDS)}")
    if (kind == "privdpo") != (epsilon is not None):
        raise _fail("--epsilon (label epsilon of one pass) is required by privdpo and only by it")
    fields = yaml.safe_load(config.read_text()) if config else {}
    if not isinstance(fields, dict):
        raise _fail(f"{config}: expected a mapping of trainer config fields")
    if kind == "ppo":
        _train_ppo(data, model, out, reward_model, fields)
        return
    from dpprefsyn.train import train as run_training

    try:
        path = run_training(kind, data, model, out, epsilon=epsilon, config=fields)
    except (TypeError, ValueError, FileNotFoundError) as err:
        raise _fail(str(err)) from None
    privacy = path / "privacy.json"
    if privacy.exists():
        typer.echo(privacy.read_text())
    typer.echo(f"model written to {path}")


def _train_ppo(data: str, model: str, out: Path, reward_model: Path | None, fields: dict) -> None:
    """RLOO / PPO-clip with the mean of the private cluster rewards (no budget spent)."""
    from dpprefsyn.artifact import PreferenceModel
    from dpprefsyn.train.data import load_preference_dataset
    from dpprefsyn.train.reward import PrivateRewardFunction
    from dpprefsyn.train.rl import RLConfig, train_rl

    if reward_model is None:
        raise _fail("ppo needs --reward-model DIR (a fitted preference model)")
    try:
        reward = PrivateRewardFunction(PreferenceModel.load(reward_model), scoring="mean")
        prompts = list(dict.fromkeys(load_preference_dataset(data)["prompt"]))
        cfg = RLConfig(**{"output_dir": str(out), **fields})
    except (TypeError, ValueError, FileNotFoundError) as err:
        raise _fail(str(err)) from None
    path = train_rl(model, prompts, reward, cfg)
    typer.echo(f"model written to {path} (reward: private model, no privacy budget spent)")


def _model_embedder(pm, cache_dir: Path | None):
    """The embedder and template a model was fitted with: scores are only valid with them."""
    from dpprefsyn.embedding import Embedder
    from dpprefsyn.templates import get_template

    embedder = Embedder.for_fitted(pm.embedder, cache_dir=cache_dir)
    return embedder, get_template(pm.embedder.get("template", "dialogue"))


@app.command()
def rerank(
    model: Annotated[Path, typer.Option(help="Preference model directory.")],
    candidates: Annotated[
        list[Path], typer.Option(help="Candidate files (AlpacaEval, MT-Bench, JSONL...).")
    ],
    out: Annotated[Path, typer.Option(help="JSONL of the best candidate per prompt.")],
    scoring: Annotated[str, typer.Option(help="mixture, mean, routed or cluster.")] = "mixture",
    cluster: Annotated[int | None, typer.Option(help="Cluster for scoring=cluster.")] = None,
    n: Annotated[int, typer.Option(help="Candidates per prompt (best of N).")] = 16,
    seed: Annotated[int, typer.Option(help="Subsample seed when a prompt has more.")] = 0,
    cache_dir: Annotated[Path | None, typer.Option(help="Embedding cache.")] = None,
) -> None:
    """Best-of-N over public candidates with the private reward (spends no budget)."""
    import numpy as np

    from dpprefsyn.artifact import PreferenceModel
    from dpprefsyn.errors import DataError
    from dpprefsyn.rerank import best_of_n, reward_scores
    from dpprefsyn.synth.backends import PoolBackend

    try:
        pm = PreferenceModel.load(model)
        pool = PoolBackend([str(c) for c in candidates]).load()
    except (DataError, FileNotFoundError, ValueError) as err:
        raise _fail(str(err)) from None
    prompts = pool.prompts_
    cands = [[(c.text, c.generator) for c in cs] for cs in pool.generate(prompts, n=n, seed=seed)]
    embedder, template = _model_embedder(pm, cache_dir)
    flat_p = [p for p, cs in zip(prompts, cands, strict=True) for _ in cs]
    flat_t = [t for cs in cands for t, _ in cs]
    emb = embedder.encode_pairs(flat_p, flat_t, template)
    prompt_emb = embedder.encode(flat_p) if scoring == "routed" else None
    try:
        s = reward_scores(pm, emb, scoring=scoring, cluster=cluster, prompt_embeddings=prompt_emb)
    except ValueError as err:
        raise _fail(str(err)) from None
    splits = np.cumsum([len(cs) for cs in cands])[:-1]
    table = best_of_n(prompts, cands, np.split(s, splits))
    out.parent.mkdir(parents=True, exist_ok=True)
    table.write_ndjson(out)
    typer.echo(f"best of {n} for {len(table)} prompts written to {out} (no privacy budget spent)")


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING)
