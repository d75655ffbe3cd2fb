"""Loading preference data from each supported source, and the collators' masks."""

from __future__ import annotations

import pytest
from datasets import Dataset, DatasetDict

from dpprefsyn.train.data import (
    PreferenceCollator,
    SFTCollator,
    load_preference_dataset,
    tokenize_response,
)


def test_loads_every_source(pairs, tmp_path):
    pairs = pairs.add_column("extra", list(range(len(pairs))))
    pairs.to_json(tmp_path / "p.jsonl")
    pairs.to_parquet(tmp_path / "p.parquet")
    pairs.save_to_disk(tmp_path / "ds")
    DatasetDict({"train": pairs}).save_to_disk(tmp_path / "dd")
    for source in (
        pairs,
        tmp_path / "p.jsonl",
        tmp_path / "p.parquet",
        tmp_path / "ds",
        tmp_path / "dd",
    ):
        loaded = load_preference_dataset(source)
        assert loaded.column_names == ["prompt", "chosen", "rejected"]
        assert len(loaded) == 16


def test_rejects_missing_or_non_string_columns_without_echoing_content(tmp_path):
    with pytest.raises(ValueError, match="no 'rejected' column"):
        load_preference_dataset(Dataset.from_dict({"prompt": ["secret"], "chosen": ["x"]}))
    bad = Dataset.from_dict({"prompt": ["secret"], "chosen": [1], "rejected": ["y"]})
    with pytest.raises(ValueError, match="'chosen' must hold strings") as err:
        load_preference_dataset(bad)
    assert "secret" not in str(err.value)
    with pytest.raises(ValueError, match="expected a save_to_disk"):
        load_preference_dataset(tmp_path / "pairs.csv")


def test_truncation_keeps_prompt_end_and_response_start(tokenizer):
    full_p, full_r = tokenize_response(
        tokenizer, "the quick brown fox", " jumps over", max_length=None, max_prompt_length=None
    )
    p, r = tokenize_response(
        tokenizer, "the quick brown fox", " jumps over", max_length=4, max_prompt_length=2
    )
    assert p == full_p[-2:] and r == full_r[:2]
    assert full_r[-1] == tokenizer.eos_token_id


def test_preference_collator_masks_prompt_and_padding(tokenizer, pairs):
    rows = [pairs[i] for i in range(3)]
    batch = PreferenceCollator(tokenizer, max_length=64)(rows)
    assert batch["input_ids"].shape[0] == 6  # chosen rows, then rejected rows
    for i, row in enumerate(rows + rows):
        key = "chosen" if i < 3 else "rejected"
        p, r = tokenize_response(
            tokenizer, row["prompt"], row[key], max_length=64, max_prompt_length=None
        )
        n = len(p) + len(r)
        assert batch["input_ids"][i, :n].tolist() == p + r
        assert batch["completion_mask"][i].tolist() == [0] * len(p) + [1] * len(r) + [0] * (
            batch["input_ids"].shape[1] - n
        )
        assert batch["attention_mask"][i].sum().item() == n


def test_privsft_collator_ignores_which_response_was_chosen(tokenizer, pairs):
    row = pairs[0]
    swapped = {**row, "chosen": row["rejected"], "rejected": row["chosen"]}
    collate = SFTCollator(tokenizer, max_length=64, both_responses=True)
    a, b = collate([row]), collate([swapped])
    assert all((a[k] == b[k]).all() for k in a)
    assert (a["labels"][:, 0] == -100).all()  # the prompt is never a target
    assert SFTCollator(tokenizer, max_length=64)([row])["input_ids"].shape[0] == 1
