"""Hostile private and public files through ``python -m pipelines.run``, end to end.

Each file either stops the run with exit code 4 and one line naming the record and the field,
or runs to the end with its bad records dropped and counted. Never a traceback, never private
text on the console, never a model or dataset from a refused run.
"""

from __future__ import annotations

import json
import logging
import time

import pytest
from hostile_corpus import (
    BAD_LINE,
    BAD_RECORDS,
    WHOLE_FILE_CASES,
    bad_candidate_files,
    bad_prompt_files,
    everything_at_once,
    huge_text,
    with_bad_record,
)

from dpprefsyn.loaders import load_preferences
from dpprefsyn.privacy.budget_store import BudgetStore
from dpprefsyn.private.fingerprint import dataset_fingerprint, load_or_create_key
from pipelines import run as run_mod


def _error_line(err: str, prefix: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("kind", list(BAD_RECORDS))
def test_a_bad_private_record_exits_4_naming_record_and_field(
    kind, demo, write_config, no_leak, workspace
):
    private = with_bad_record(demo, kind)
    _, field, says = BAD_RECORDS[kind]
    t = time.perf_counter()
    assert run_mod.main(["--config", str(write_config(private))]) == 4
    assert time.perf_counter() - t < 60  # a 10 MB response is cut before it is tokenized
    line = _error_line(no_leak(), "bad input:")
    assert f"record {private.name}:{BAD_LINE}, field '{field}'" in line
    assert says in line
    assert not list((workspace / "out" / ".steps").glob("fit-*/model"))


@pytest.mark.parametrize("kind", list(WHOLE_FILE_CASES))
def test_a_file_without_records_exits_4(kind, demo, write_config, no_leak):
    private = demo.folder / f"{kind}.jsonl"
    private.write_bytes(WHOLE_FILE_CASES[kind])
    assert run_mod.main(["--config", str(write_config(private))]) == 4
    line = _error_line(no_leak(), "bad input:")
    assert private.name in line


def test_drop_mode_counts_every_bad_record_and_the_card_states_the_guarantee(
    demo, write_config, no_leak, workspace, caplog
):
    """Extra fields and a 10 MB response are fine; each bad kind is dropped and counted."""
    private, expected = everything_at_once(demo, n_good=60)
    caplog.set_level(logging.WARNING)
    config = write_config(private, on_error="drop")
    assert run_mod.main(["--config", str(config)]) == 0
    err = no_leak()
    counts = _error_line(err, "private data:")
    for kind, count in expected.items():
        assert f"'{kind}': {count}" in counts
    assert "dropped 2 record(s) whose chosen and rejected responses embed identically" in (
        caplog.text
    )
    out = workspace / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pairs_written"] > 0
    report = json.loads((out / "privacy_report.json").read_text())
    total = report["total"]
    card = (out / "README.md").read_text()
    for phrase in (
        # what is protected, and the neighbouring relation
        "the prompt, the chosen\nresponse, the rejected response and the preference label",
        report["neighbouring_relation"],
        # what was spent: the actual values, from the report
        f"epsilon={total['epsilon']:.4g} (of a budget of epsilon=8)",
        f"delta={total['delta']:.3g}",
        # mechanisms and their composition
        "`count`: the number of records, with Laplace noise",
        "`reward`: each cluster's first and second moments",
        report["composition"],
        # what is assumed public
        "all-MiniLM-L6-v2",
        "the public candidate pool the projection is fitted on",
        demo.prompts.name,
        # the noise source and the floating-point caveat
        "fixed seed",
        "64-bit floating point",
        # what is not covered
        "budgets/<fingerprint>.json",
        "k times\n  epsilon",
        "Public data leakage",
        "Side channels",
        "operator's console",
    ):
        assert phrase in card, phrase
    assert f"**({total['epsilon']:.3g}, {total['delta']:.3g})-differentially private**" in card


def test_a_dataset_too_small_for_epsilon_is_refused_and_its_count_is_spent(
    demo, write_config, no_leak, workspace
):
    private = demo.private("tiny.jsonl", demo.records(20, start=100))
    assert run_mod.main(["--config", str(write_config(private, epsilon=0.5))]) == 4
    line = _error_line(no_leak(), "refused:")
    assert "too small for epsilon=0.5" in line and "n~=" in line
    assert "Collect more records" in line
    key = load_or_create_key(workspace / "state")
    fingerprint = dataset_fingerprint(load_preferences(private).table, key)
    log = BudgetStore(workspace / "state" / "budgets").spends(fingerprint)
    refused = [s for s in log if "refused" in s["run"]]
    assert len(refused) == 1
    assert refused[0]["epsilon"] == pytest.approx(0.02 * 0.5)  # the Laplace count only
    assert refused[0]["delta"] == 0.0


PUBLIC_CASES = [
    *(("prompts", k) for k in ("missing_field", "blank_prompt", "not_utf8", "not_a_string")),
    ("prompts", "empty"),
    *(("candidates", k) for k in ("missing_field", "not_utf8", "not_a_string")),
]


@pytest.mark.parametrize(("role", "kind"), PUBLIC_CASES)
def test_a_bad_public_file_exits_4_naming_record_and_field(role, kind, demo, write_config, no_leak):
    files = bad_prompt_files(demo) if role == "prompts" else bad_candidate_files(demo)
    path, record, field = files[kind]
    private = demo.private("good.jsonl", demo.records(60))
    assert run_mod.main(["--config", str(write_config(private, **{role: path}))]) == 4
    assert f"{record}, field '{field}'" in _error_line(no_leak(), "bad input:")


def test_identical_candidates_leave_no_difference_to_project_on(demo, write_config, no_leak):
    rows = [{**c, "response": "The same answer."} for c in demo.candidate_rows]
    candidates = demo.public("candidates_identical.jsonl", rows)
    private = demo.private("good.jsonl", demo.records(60))
    assert run_mod.main(["--config", str(write_config(private, candidates=candidates))]) == 4
    assert "two or more distinct responses" in _error_line(no_leak(), "bad input:")


def test_huge_and_duplicate_public_prompts_are_counted_not_fatal(
    demo, write_config, no_leak, workspace
):
    """A 10 MB prompt (no candidates) and a 10 MB candidate run; duplicates are counted."""
    huge_prompt = {"prompt_id": "huge", "prompt": huge_text()}
    prompts = demo.public(
        "prompts_weird.jsonl", [*demo.prompt_rows, demo.prompt_rows[0], huge_prompt]
    )
    first = demo.candidate_rows[0]
    huge_candidate = {**first, "response": huge_text(), "generator": "runaway"}
    candidates = demo.public("candidates_weird.jsonl", [*demo.candidate_rows, huge_candidate])
    private = demo.private("good.jsonl", demo.records(60))
    config = write_config(private, prompts=prompts, candidates=candidates)
    t = time.perf_counter()
    assert run_mod.main(["--config", str(config)]) == 0
    assert time.perf_counter() - t < 90
    no_leak()
    summary = json.loads((workspace / "out" / "summary.json").read_text())
    assert summary["prompts_dropped"] == {"duplicate": 1}
    assert summary["pairs_dropped"].get("fewer_than_two_candidates") == 1
