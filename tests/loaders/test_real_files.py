"""The real public preference files listed in ../shared/data/INVENTORY.md (human-pref table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpprefsyn.errors import DataError
from dpprefsyn.loaders import PreferenceData, load_preferences
from dpprefsyn.loaders.records import Pair, check_pair

pytestmark = pytest.mark.realdata

LLMBAR = [
    # (path under llmbar/Dataset, records = pairs: every LLMBar label is 1 or 2)
    ("LLMBar/Natural", 100),
    ("LLMBar/Adversarial/Neighbor", 134),
    ("LLMBar/Adversarial/GPTInst", 92),
    ("LLMBar/Adversarial/GPTOut", 47),
    ("LLMBar/Adversarial/Manual", 46),
    ("Processed/MT-Bench", 200),
    ("Processed/FairEval", 66),
]


def _valid(data: PreferenceData) -> None:
    for row in data.table.rows():
        check_pair(Pair(*row))
    assert data.n_read == len(data) + sum(data.dropped.values()) or data.format == "oasst"


def test_hh_rlhf_harmless_test_split(shared_data: Path):
    path = shared_data / "hh-rlhf/harmless-base/test.jsonl.gz"
    data = load_preferences(path, on_error="drop")
    assert (data.format, data.n_read, len(data)) == ("hh-rlhf", 2312, 2304)
    # 4 empty chosen replies; 4 pairs whose dialogues diverge before the last chosen turn.
    assert data.dropped == {"empty_response": 4, "prefix_mismatch": 4}
    assert data.table["record_id"][0] == "test.jsonl.gz:0"
    assert data.table["prompt"].str.starts_with("\n\nHuman:").all()
    assert data.table["prompt"].str.ends_with("\n\nAssistant:").all()
    _valid(data)
    with pytest.raises(DataError) as info:
        load_preferences(path)
    assert (info.value.record, info.value.field) == ("test.jsonl.gz:86", "chosen")


def test_oasst_trees_adjacent_ranks(shared_data: Path):
    data = load_preferences(shared_data / "oasst/en_100_tree.jsonl")
    assert (data.format, data.n_read, len(data), data.dropped) == ("oasst", 100, 429, {})
    assert data.table["record_id"].str.starts_with("oasst:").all()
    assert data.table["prompt"].str.starts_with("Human: ").all()
    _valid(data)


def test_pandalm_ties_dropped_and_counted(shared_data: Path):
    data = load_preferences(shared_data / "pandalm/testset-v1.json", on_error="drop")
    assert (data.format, data.n_read, len(data)) == ("pairwise", 999, 855)
    # 85 all-tie triples; 53 chosen/rejected responses are empty and 6 are JSON booleans.
    assert data.dropped == {"tie": 85, "empty_response": 53, "not_a_string": 6}
    _valid(data)


@pytest.mark.parametrize(("folder", "n_pairs"), LLMBAR)
def test_llmbar(shared_data: Path, folder: str, n_pairs: int):
    data = load_preferences(shared_data / "llmbar/Dataset" / folder / "dataset.json")
    assert (data.format, data.n_read, len(data), data.dropped) == ("pairwise", n_pairs, n_pairs, {})
    _valid(data)


def test_llmeval2_has_two_unusable_pairs(shared_data: Path):
    path = shared_data / "llmbar/Dataset/Processed/LLMEval^2/dataset.json"
    data = load_preferences(path, on_error="drop")
    assert (data.format, data.n_read, len(data)) == ("pairwise", 200, 198)
    assert data.dropped == {"empty_response": 1, "identical_responses": 1}
    _valid(data)


def test_hhh_alignment_template_parsed(shared_data: Path):
    data = load_preferences(shared_data / "hhh-alignment/hhh_alignment_eval.json")
    assert (data.format, data.n_read, len(data), data.dropped) == ("hhh", 221, 221, {})
    assert not data.table["prompt"].str.contains("###").any()
    _valid(data)
