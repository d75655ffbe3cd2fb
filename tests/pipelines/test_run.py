"""End-to-end runs of ``python -m pipelines.run`` on a small demo, on CPU and offline."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from dpprefsyn.privacy.budget_store import BudgetStore
from pipelines import run as run_mod


def write_config(tmp_path: Path, demo_dir: Path, cache: Path, **overrides) -> Path:
    cfg = {
        "name": "test",
        "out_dir": str(tmp_path / "out"),
        "state_dir": str(tmp_path / "state"),
        "embedding_cache": str(cache),
        "private": {"path": str(demo_dir / "private.jsonl")},
        "fit": {"epsilon": 4.0},
        "budget": {"lifetime_epsilon": 10.0},
        "prompts": [{"path": str(demo_dir / "public_prompts.jsonl")}],
        "generation": {
            "backend": "pool",
            "n": 8,
            "shard_size": 16,
            "pool": {"sources": [str(demo_dir / "public_candidates.jsonl")]},
        },
        "demo_truth": str(demo_dir / "truth.json"),
    }
    for key, value in overrides.items():
        if value is None:
            cfg.pop(key, None)
        elif isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_demo_run_writes_a_trl_dataset_and_a_rerun_is_free(
    tmp_path, demo_dir, embedding_cache, capfd
):
    import datasets
    from canaries import CANARY

    config = write_config(tmp_path, demo_dir, embedding_cache)
    t = time.perf_counter()
    assert run_mod.main(["--config", str(config)]) == 0
    first = time.perf_counter() - t
    out = tmp_path / "out"
    # The private canary reaches no output file and no log line.
    for path in out.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    captured = capfd.readouterr()
    assert CANARY not in captured.out + captured.err
    ds = datasets.load_from_disk(str(out / "dataset"))
    assert {"prompt", "chosen", "rejected"} <= set(ds.column_names)
    assert len(ds) > 0
    assert all(c != r for c, r in zip(ds["chosen"], ds["rejected"], strict=True))
    report = json.loads((out / "privacy_report.json").read_text())
    assert report["total"]["epsilon"] <= 4.0 + 1e-9
    card = (out / "README.md").read_text()
    assert "differentially private" in card and report["neighbouring_relation"] in card
    summary = json.loads((out / "summary.json").read_text())
    fingerprint = report["private_data_fingerprint"]
    spent_before = BudgetStore(tmp_path / "state" / "budgets").spent(fingerprint)

    t = time.perf_counter()
    assert run_mod.main(["--config", str(config)]) == 0
    second = time.perf_counter() - t
    again = json.loads((out / "summary.json").read_text())
    assert all(step["cached"] for step in again["steps"].values())
    assert again["epsilon_this_run"] == 0.0
    assert BudgetStore(tmp_path / "state" / "budgets").spent(fingerprint) == spent_before
    assert second < 0.1 * first
    assert summary["pairs_written"] == again["pairs_written"]


def test_a_model_fitted_elsewhere_synthesises_without_private_data(
    tmp_path, demo_dir, embedding_cache, capfd
):
    """The privacy boundary as a deployment: the owner fits, synthesis gets only the model."""
    import shutil

    import polars as pl
    from canaries import CANARY

    owner = tmp_path / "owner"
    owner.mkdir()
    assert run_mod.main(["--config", str(write_config(owner, demo_dir, embedding_cache))]) == 0
    model_dir = next((owner / "out").rglob("model.json")).parent
    public = tmp_path / "public"
    public.mkdir()
    for name in ("public_prompts.jsonl", "public_candidates.jsonl", "truth.json"):
        shutil.copy(demo_dir / name, public / name)
    capfd.readouterr()

    config = write_config(
        tmp_path, public, embedding_cache, private=None, fit=None, model=str(model_dir)
    )
    assert run_mod.main(["--config", str(config)]) == 0
    out = tmp_path / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model_given"] and summary["epsilon_this_run"] == 0.0
    assert not (tmp_path / "state" / "budgets").exists()
    owner_pairs = pl.read_parquet(next((owner / "out").rglob("pairs.parquet")))
    pairs = pl.read_parquet(next(out.rglob("pairs.parquet")))
    assert pairs.drop("source").equals(owner_pairs.drop("source"))  # source: the file path
    report = json.loads((out / "privacy_report.json").read_text())
    assert f"{report['total']['epsilon']:.4g}" in (out / "README.md").read_text()
    for path in out.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
    captured = capfd.readouterr()
    assert CANARY not in captured.out + captured.err
    assert "private data:" not in captured.err  # no private record was read


@pytest.mark.parametrize("sources", [{}, {"model": "somewhere"}])
def test_exactly_one_of_private_data_or_model(tmp_path, demo_dir, embedding_cache, sources):
    overrides = {"private": None} if not sources else sources
    config = write_config(tmp_path, demo_dir, embedding_cache, **overrides)
    assert run_mod.main(["--config", str(config)]) == 2


def test_changing_selection_reruns_only_selection(tmp_path, demo_dir, embedding_cache):
    config = write_config(tmp_path, demo_dir, embedding_cache)
    assert run_mod.main(["--config", str(config)]) == 0
    config = write_config(tmp_path, demo_dir, embedding_cache, selection={"min_gap": 2.0})
    assert run_mod.main(["--config", str(config)]) == 0
    steps = json.loads((tmp_path / "out" / "summary.json").read_text())["steps"]
    assert [k for k, v in steps.items() if not v["cached"]] == ["select"]


def test_killed_generation_resumes_without_regenerating_or_spending(
    tmp_path, demo_dir, embedding_cache, monkeypatch
):
    from dpprefsyn.synth.backends.pool import PoolBackend

    class Killed(BaseException):
        """Stands in for SIGKILL/Ctrl-C: nothing in the run may catch it."""

    calls: list[int] = []
    killed: list[bool] = []
    real = PoolBackend._generate

    def flaky(self, prompts, n, seed):
        calls.append(len(prompts))
        if len(calls) == 3 and not killed:
            killed.append(True)
            raise Killed  # the run is killed during the third shard
        return real(self, prompts, n, seed)

    monkeypatch.setattr(PoolBackend, "_generate", flaky)
    config = write_config(tmp_path, demo_dir, embedding_cache)
    with pytest.raises(Killed):
        run_mod.main(["--config", str(config)])
    shards = list((tmp_path / "out" / ".steps").glob("generate-*/shards/*.jsonl"))
    assert len(shards) == 2
    assert not (tmp_path / "state" / "budgets").exists() or not list(
        (tmp_path / "state" / "budgets").glob("*.json")
    )

    calls.clear()
    assert run_mod.main(["--config", str(config)]) == 0
    n_prompts = 72
    assert sum(calls) == n_prompts - 2 * 16  # only the unfinished shards were generated
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["lifetime_epsilon_spent"] == pytest.approx(summary["fit_epsilon"])


def test_budget_refusal_exits_3_and_writes_nothing(tmp_path, demo_dir, embedding_cache):
    config = write_config(tmp_path, demo_dir, embedding_cache, budget={"lifetime_epsilon": 1.0})
    assert run_mod.main(["--config", str(config)]) == 3
    assert not (tmp_path / "out" / "dataset").exists()
    assert list((tmp_path / "out" / ".steps").glob("fit-*/model")) == []


def test_second_fit_on_the_same_data_is_new_spending(tmp_path, demo_dir, embedding_cache):
    config = write_config(tmp_path, demo_dir, embedding_cache, budget={"lifetime_epsilon": 6.0})
    assert run_mod.main(["--config", str(config)]) == 0
    # Another epsilon is another fit: it must be paid for, and 4 + 4 > 6 is refused.
    config = write_config(
        tmp_path, demo_dir, embedding_cache, budget={"lifetime_epsilon": 6.0}, fit={"epsilon": 4.5}
    )
    assert run_mod.main(["--config", str(config)]) == 3


def test_a_held_lock_exits_5(tmp_path, demo_dir, embedding_cache):
    from dpprefsyn.loaders import load_preferences
    from dpprefsyn.private.fingerprint import dataset_fingerprint, load_or_create_key

    config = write_config(tmp_path, demo_dir, embedding_cache)
    key = load_or_create_key(tmp_path / "state")
    fp = dataset_fingerprint(load_preferences(demo_dir / "private.jsonl").table, key)
    with BudgetStore(tmp_path / "state" / "budgets").lock(fp):
        assert run_mod.main(["--config", str(config)]) == 5


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"surprise": 1}, "surprise"),
        ({"fit": {"epsilon": -1}}, "epsilon"),
        ({"generation": {"n": 1}}, "generation.n"),
        ({"fit": {"no_such_setting": 1}}, "no_such_setting"),
    ],
)
def test_bad_config_exits_2_with_a_clear_message(
    tmp_path, demo_dir, embedding_cache, capsys, overrides, needle
):
    config = write_config(tmp_path, demo_dir, embedding_cache, **overrides)
    assert run_mod.main(["--config", str(config)]) == 2
    assert needle in capsys.readouterr().err
