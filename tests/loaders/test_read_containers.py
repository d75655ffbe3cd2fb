"""Every container (JSONL, JSON list, gzip, Parquet, CSV, saved or hub dataset) gives one table."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import datasets
import polars as pl
import pytest

from dpprefsyn.errors import DataError
from dpprefsyn.loaders import FORMATS, PreferenceData, load_preferences

COLUMNS = ["record_id", "prompt", "chosen", "rejected"]


def _check(data: PreferenceData, records: list[dict[str, str]], prefix: str) -> None:
    assert data.table.columns == COLUMNS
    assert data.table.schema == pl.Schema(dict.fromkeys(COLUMNS, pl.String()))
    assert data.format == "preference"
    assert (len(data), data.n_read, data.dropped) == (len(records), len(records), {})
    assert data.table["record_id"].to_list() == [f"{prefix}:{i}" for i in range(len(records))]
    assert data.table.drop("record_id").to_dicts() == records


@pytest.fixture
def records(good_record: dict[str, str]) -> list[dict[str, str]]:
    second = {"prompt": "p2", "chosen": "yes, with a comma", "rejected": 'no "quoted"\nline'}
    return [good_record, second]


def test_jsonl(write_jsonl, records):
    _check(load_preferences(write_jsonl("pairs.jsonl", records)), records, "pairs.jsonl")


def test_jsonl_skips_blank_lines_but_ids_keep_line_index(tmp_path, records):
    path = tmp_path / "pairs.jsonl"
    path.write_text(f"{json.dumps(records[0])}\n\n{json.dumps(records[1])}\n")
    assert load_preferences(path).table["record_id"].to_list() == ["pairs.jsonl:0", "pairs.jsonl:2"]


def test_json_list(tmp_path, records):
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(records, indent=2))
    _check(load_preferences(path), records, "pairs.json")


def test_gzip_is_transparent(tmp_path, records):
    path = tmp_path / "pairs.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(map(json.dumps, records)).encode()))
    _check(load_preferences(path), records, "pairs.jsonl.gz")


def test_parquet(tmp_path, records):
    path = tmp_path / "pairs.parquet"
    pl.DataFrame(records).write_parquet(path)
    _check(load_preferences(path), records, "pairs.parquet")


def test_csv(tmp_path, records):
    path = tmp_path / "pairs.csv"
    pl.DataFrame(records).write_csv(path)
    _check(load_preferences(path), records, "pairs.csv")


def test_saved_dataset_dir(tmp_path, records):
    datasets.Dataset.from_list(records).save_to_disk(tmp_path / "ds")
    _check(load_preferences(tmp_path / "ds"), records, "ds")


def test_saved_dataset_dict_picks_split(tmp_path, records):
    splits = {"train": records[:1], "test": records[1:]}
    datasets.DatasetDict(
        {name: datasets.Dataset.from_list(rows) for name, rows in splits.items()}
    ).save_to_disk(tmp_path / "dd")
    _check(load_preferences(tmp_path / "dd"), records[:1], "dd[train]")
    _check(load_preferences(tmp_path / "dd", split="test"), records[1:], "dd[test]")
    with pytest.raises(DataError, match="no split 'dev'"):
        load_preferences(tmp_path / "dd", split="dev")


@pytest.mark.parametrize("container", ["parquet", "dataset"])
def test_conversational_in_typed_containers(tmp_path, container):
    """Message lists survive Parquet and Arrow as lists of structs."""
    turn = [{"role": "user", "content": "Hi"}]
    record = {
        "prompt": turn,
        "chosen": [{"role": "assistant", "content": "Hello"}],
        "rejected": [{"role": "assistant", "content": "Bye"}],
    }
    path = tmp_path / ("conv.parquet" if container == "parquet" else "conv")
    if container == "parquet":
        pl.DataFrame([record]).write_parquet(path)
    else:
        datasets.Dataset.from_list([record]).save_to_disk(path)
    data = load_preferences(path)
    assert data.format == "conversational"
    assert data.table.drop("record_id").rows() == [("Human: Hi", "Hello", "Bye")]


def test_hub_name_goes_to_load_dataset(monkeypatch, records):
    calls = []

    def fake_load_dataset(name: str, *, split: str) -> datasets.Dataset:
        calls.append((name, split))
        return datasets.Dataset.from_list(records)

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    data = load_preferences("someone/prefs", split="test")
    assert calls == [("someone/prefs", "test")]
    assert data.source == "someone/prefs"
    _check(data, records, "someone/prefs[test]")


def test_hub_failure_is_file_not_found(monkeypatch):
    def offline(name: str, *, split: str) -> None:
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(FileNotFoundError, match="could not be loaded from the Hugging Face hub"):
        load_preferences("someone/prefs")


def test_missing_file_does_not_query_the_hub(monkeypatch, tmp_path):
    monkeypatch.setattr(datasets, "load_dataset", pytest.fail)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_preferences(tmp_path / "absent.jsonl")


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.jsonl", b"", "no records"),
        ("blank.jsonl", b"\n  \n", "no records"),
        ("empty.json", b"[]", "no records"),
        ("header.csv", b"prompt,chosen,rejected\n", "no records"),
        ("broken.json", b'[{"prompt": "a",', "not valid JSON at line 1"),
        ("single.json", b'{"prompt": "a"}', "cannot tell the format"),
        ("pairs.txt", b"x", "unknown file type '.txt'"),
        ("pairs.jsonl.gz", b"not gzip", "not a valid gzip file"),
        ("pairs.parquet", b"not parquet", "not a readable Parquet file"),
    ],
)
def test_unusable_sources_raise_data_error(tmp_path, name, content, reason):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError, match=reason) as info:
        load_preferences(path)
    assert info.value.record == str(path)


def test_directory_that_is_not_a_saved_dataset(tmp_path):
    with pytest.raises(DataError, match="save_to_disk"):
        load_preferences(tmp_path)


def test_column_mapping(write_jsonl):
    row = {"question": "q", "good": "a", "bad": "b", "prompt": "ignored", "extra": 1}
    mapping = {"prompt": "question", "chosen": "good", "rejected": "bad"}
    data = load_preferences(write_jsonl("renamed.jsonl", [row]), columns=mapping)
    assert data.format == "preference"
    assert data.table.drop("record_id").to_dicts() == [
        {"prompt": "q", "chosen": "a", "rejected": "b"}
    ]


def test_column_mapping_errors_name_the_source_column(write_jsonl):
    path = write_jsonl("renamed.jsonl", [{"question": "q", "chosen": "a", "rejected": 3}])
    with pytest.raises(DataError) as info:
        load_preferences(path, format="preference", columns={"prompt": "question"})
    assert info.value.field == "rejected"
    path = write_jsonl("renamed.jsonl", [{"question": None, "chosen": "a", "rejected": "b"}])
    with pytest.raises(DataError) as info:
        load_preferences(path, format="preference", columns={"prompt": "question"})
    assert (info.value.field, info.value.reason) == ("question", "expected a string (got null)")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"format": "xml"}, "format must be one of"),
        ({"on_error": "ignore"}, "on_error must be one of"),
        ({"columns": {"answer": "a"}}, "columns keys"),
        ({"columns": {"prompt": 1}}, "columns values"),
    ],
)
def test_bad_options(write_jsonl, good_record, options, message):
    with pytest.raises(ValueError, match=message):
        load_preferences(write_jsonl("p.jsonl", [good_record]), **options)


def test_formats_lists_auto_and_every_format():
    assert FORMATS[0] == "auto"
    assert set(FORMATS[1:]) == {
        "preference",
        "conversational",
        "hh-rlhf",
        "oasst",
        "pairwise",
        "hhh",
    }


def test_source_is_recorded_as_given(write_jsonl, good_record):
    path: Path = write_jsonl("p.jsonl", [good_record])
    assert load_preferences(str(path)).source == str(path)
