"""Public prompt loaders: every shipped public set loads, auto-detects, and bad records fail."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import datasets
import polars as pl
import pytest

from dpprefsyn.errors import DataError
from dpprefsyn.synth.prompts import FORMATS, PROMPT_FORMATS, PromptSet, load_prompts

# --- the real public files ----------------------------------------------------------------------

REAL = [
    ("mt-bench/question.jsonl", "mt-bench", 80),
    ("vicuna-bench/question.jsonl", "mt-bench", 80),
    ("arena-hard/arena-hard-v0.1/question.jsonl", "arena-hard", 500),
    ("alpaca-eval/results/gpt4/model_outputs.json", "alpaca-eval", 805),
    ("alpaca-eval/results/phi-2/model_outputs.json", "alpaca-eval", 803),
    ("oasst/en_100_text.jsonl", "oasst", 100),
    ("oasst/prompt_lottery_en_250_text.jsonl", "oasst", 250),
    ("self-instruct/seed_tasks.jsonl", "self-instruct", 175),
    ("self-instruct/user_oriented_instructions.jsonl", "self-instruct", 252),
    ("koala/koala_test_set.jsonl", "plain", 180),
    ("xsum/xsum-human-evaluation-data.tar.gz", "xsum", 50),
]


@pytest.mark.realdata
@pytest.mark.parametrize(("relpath", "fmt", "count"), REAL, ids=[r[0] for r in REAL])
def test_real_file_loads_with_its_count_and_format(shared_data, relpath, fmt, count):
    prompts = load_prompts(shared_data / relpath)
    assert (prompts.format, len(prompts), prompts.dropped) == (fmt, count, {})
    table = prompts.table
    assert table.columns == ["prompt_id", "prompt", "source", *PROMPT_FORMATS[fmt].extras]
    assert table.schema == pl.Schema(dict.fromkeys(table.columns, pl.String()))
    assert table["prompt_id"].n_unique() == count
    assert (
        table.select(pl.col("prompt_id", "prompt", "source").null_count()).sum_horizontal()[0] == 0
    )
    assert all(p.strip() for p in prompts.prompts)
    assert table["source"].unique().to_list() == ["/".join(Path(relpath).parts[-2:])]
    explicit = load_prompts(shared_data / relpath, format=fmt)
    assert explicit.table.equals(table)


@pytest.mark.realdata
def test_mt_bench_first_turn_ids_categories_and_references(shared_data):
    table = load_prompts(shared_data / "mt-bench/question.jsonl").table
    assert table["prompt_id"].to_list() == [str(i) for i in range(81, 161)]
    first = json.loads((shared_data / "mt-bench/question.jsonl").read_text().splitlines()[0])
    assert table["prompt"][0] == first["turns"][0]
    assert table["category"].value_counts()["count"].to_list() == [10] * 8
    assert table["reference"].is_not_null().sum() == 39


@pytest.mark.realdata
def test_alpaca_eval_keeps_dataset_so_callers_can_filter(shared_data):
    table = load_prompts(shared_data / "alpaca-eval/results/gpt4/model_outputs.json").table
    counts = dict(table["dataset"].value_counts().iter_rows())
    assert counts == {
        "selfinstruct": 252,
        "oasst": 188,
        "koala": 156,
        "helpful_base": 129,
        "vicuna": 80,
    }
    public_only = table.filter(~pl.col("dataset").is_in(["helpful_base", "oasst"]))
    assert public_only.height == 805 - 129 - 188
    assert table["prompt_id"][17] == "model_outputs.json:17"


@pytest.mark.realdata
def test_self_instruct_joins_instance_input(shared_data):
    raw = [
        json.loads(line)
        for line in (shared_data / "self-instruct/seed_tasks.jsonl").read_text().splitlines()
    ]
    prompts = load_prompts(shared_data / "self-instruct/seed_tasks.jsonl")
    rows = prompts.table.select("prompt_id", "prompt").rows()
    for record, (prompt_id, prompt) in zip(raw, rows, strict=True):
        extra = record["instances"][0]["input"]
        expected = f"{record['instruction']}\n\n{extra}" if extra.strip() else record["instruction"]
        assert (prompt_id, prompt) == (record["id"], expected)
    assert any("\n\n" in p for p in prompts.prompts)


@pytest.mark.realdata
def test_xsum_documents_and_reference_summaries(shared_data):
    table = load_prompts(shared_data / "xsum/xsum-human-evaluation-data.tar.gz").table
    assert table["prompt_id"][0] == "4867"
    assert table["prompt"][0].startswith("West Berkshire Council is setting up")
    assert "Document-400" not in "".join(table["prompt"]) and "LEAD" not in table["prompt"][0]
    assert table["reference"][0].startswith("a council plans to employ")
    assert table["reference"].is_not_null().all()


# --- containers, column mapping, ids ------------------------------------------------------------


def _jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_plain_jsonl_with_own_ids_and_reference(tmp_path):
    path = _jsonl(
        tmp_path / "p.jsonl",
        [{"id": 7, "prompt": "Hi?", "reference": "Hello."}, {"prompt": "Bye?"}],
    )
    prompts = load_prompts(path)
    assert prompts.format == "plain"
    assert prompts.table.rows() == [
        ("7", "Hi?", f"{tmp_path.name}/p.jsonl", "Hello."),
        ("p.jsonl:1", "Bye?", f"{tmp_path.name}/p.jsonl", None),
    ]


def test_columns_mapping_csv_parquet_and_json_list(tmp_path):
    frame = pl.DataFrame({"qid": ["a", "b"], "question": ["One?", "Two?"]})
    frame.write_csv(tmp_path / "q.csv")
    frame.write_parquet(tmp_path / "q.parquet")
    (tmp_path / "q.json").write_text(json.dumps(frame.to_dicts()))
    columns = {"prompt": "question", "prompt_id": "qid"}
    for name in ("q.csv", "q.parquet", "q.json"):
        prompts = load_prompts(tmp_path / name, columns=columns)
        assert prompts.table.select("prompt_id", "prompt").rows() == [("a", "One?"), ("b", "Two?")]


def test_saved_dataset_directory_and_hub_name(tmp_path, monkeypatch):
    dataset = datasets.Dataset.from_dict({"prompt": ["x?", "y?"]})
    datasets.DatasetDict({"test": dataset}).save_to_disk(tmp_path / "saved")
    assert load_prompts(tmp_path / "saved", split="test").prompts == ["x?", "y?"]

    calls = []

    def fake_load_dataset(name, split):
        calls.append((name, split))
        return dataset

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    prompts = load_prompts("org/public-prompts")
    assert calls == [("org/public-prompts", "train")]
    assert prompts.table["prompt_id"].to_list() == [
        "org/public-prompts[train]:0",
        "org/public-prompts[train]:1",
    ]
    assert prompts.table["source"][0] == "org/public-prompts"


def test_alpaca_input_is_joined_only_when_present(tmp_path):
    path = _jsonl(
        tmp_path / "a.jsonl",
        [
            {"instruction": "Translate.", "input": "bonjour", "output": "hello"},
            {"instruction": "Say hi.", "input": " ", "output": "hi"},
        ],
    )
    prompts = load_prompts(path)
    assert prompts.format == "alpaca"
    assert prompts.prompts == ["Translate.\n\nbonjour", "Say hi."]


def test_arena_hard_older_turns_shape(tmp_path):
    path = _jsonl(
        tmp_path / "question.jsonl",
        [{"question_id": "abc", "category": "arena-hard-v0.1", "turns": [{"content": "Q?"}]}],
    )
    prompts = load_prompts(path)
    assert (prompts.format, prompts.table.row(0)[:2]) == ("arena-hard", ("abc", "Q?"))


def test_duplicates_are_dropped_and_counted_even_when_raising(tmp_path):
    path = _jsonl(tmp_path / "o.jsonl", ['"a"', '"b"', '"a"', '"a "'])
    prompts = load_prompts(path)
    assert prompts.prompts == ["a", "b", "a "]
    assert prompts.dropped == {"duplicate": 1}


def test_limit_keeps_the_first_usable_prompts(tmp_path):
    path = _jsonl(tmp_path / "o.jsonl", ['"a"', '"a"', '""', '"b"', '"c"', "{broken"])
    prompts = load_prompts(path, limit=2, on_error="drop")
    assert prompts.prompts == ["a", "b"]
    assert prompts.dropped == {"duplicate": 1, "empty_prompt": 1}


# --- errors name the record and the field -------------------------------------------------------

BAD = [
    ('{"prompt": "ok"}\n{"prompt": \n', "q.jsonl:1", "<record>", "broken_json"),
    ('{"prompt": "ok"}\n{"prompt": 3}\n', "q.jsonl:1", "prompt", "not_a_string"),
    ('{"prompt": "ok"}\n{"prompt": "  "}\n', "q.jsonl:1", "prompt", "empty_prompt"),
    ('{"prompt": "ok"}\n{"id": 1}\n', "q.jsonl:1", "prompt", "missing_field"),
    (
        '{"question_id": 1, "turns": ["ok"]}\n{"question_id": 2, "turns": []}\n',
        "q.jsonl:1",
        "turns[0]",
        "missing_field",
    ),
    (
        '{"question_id": 1, "turns": ["ok"]}\n{"question_id": 2, "turns": [5]}\n',
        "q.jsonl:1",
        "turns[0]",
        "not_a_string",
    ),
    ('"ok"\n{"prompt": "x"}\n"fine"\n', "q.jsonl:1", "<record>", "not_a_string"),
]


@pytest.mark.parametrize(
    ("text", "record", "field", "kind"), BAD, ids=[b[3] + "-" + b[2] for b in BAD]
)
def test_bad_record_raises_naming_record_and_field_or_is_dropped(
    tmp_path, text, record, field, kind
):
    path = tmp_path / "q.jsonl"
    path.write_text(text)
    with pytest.raises(DataError) as info:
        load_prompts(path)
    assert (info.value.record, info.value.field) == (record, field)
    assert load_prompts(path, on_error="drop").dropped == {kind: 1}


def test_error_names_the_mapped_source_column(tmp_path):
    path = _jsonl(tmp_path / "q.jsonl", [{"question": "ok"}, {"question": ""}])
    with pytest.raises(DataError, match="field 'question'"):
        load_prompts(path, columns={"prompt": "question"})


def test_undetectable_format_says_what_it_saw(tmp_path):
    path = _jsonl(tmp_path / "q.jsonl", [{"text": "hello", "score": 1}])
    with pytest.raises(DataError, match=r"\{'score': number, 'text': string\}.*format="):
        load_prompts(path)


def test_whole_source_problems(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DataError, match="no records"):
        load_prompts(tmp_path / "empty.jsonl")
    _jsonl(tmp_path / "blank.jsonl", ['""', '" "'])
    with pytest.raises(DataError, match="no usable prompt"):
        load_prompts(tmp_path / "blank.jsonl", on_error="drop")
    (tmp_path / "bad.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(DataError, match="tar archive"):
        load_prompts(tmp_path / "bad.tar.gz")
    with pytest.raises(FileNotFoundError):
        load_prompts(tmp_path / "missing.jsonl")


def test_xsum_archive_parsing(tmp_path):
    text = (
        "==11==\nDocument-400\nshort .\n\nDocument-Full\nFirst line .\nSecond line .\n\n"
        "LEAD\nfirst .\n\nReference\nref one .\n\nQuestions-Answers\nWho? [x]\n\n"
        "==12==\nDocument-Full\nOther doc .\n\nReference\nref two .\n"
    )
    data = text.encode()
    with tarfile.open(tmp_path / "x.tar.gz", "w:gz") as archive:
        info = tarfile.TarInfo("data/x.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    prompts = load_prompts(tmp_path / "x.tar.gz")
    assert prompts.format == "xsum"
    assert prompts.table.select("prompt_id", "prompt", "reference").rows() == [
        ("11", "First line .\nSecond line .", "ref one ."),
        ("12", "Other doc .", "ref two ."),
    ]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"format": "nope"}, "format must be"),
        ({"on_error": "skip"}, "on_error"),
        ({"columns": {"chosen": "x"}}, "columns keys"),
        ({"limit": 0}, "limit"),
    ],
)
def test_bad_options(tmp_path, kwargs, match):
    path = _jsonl(tmp_path / "q.jsonl", ['"a"'])
    with pytest.raises(ValueError, match=match):
        load_prompts(path, **kwargs)


def test_every_format_is_reachable_and_promptset_checks_its_table():
    assert FORMATS == ("auto", *PROMPT_FORMATS)
    with pytest.raises(ValueError, match="must start with"):
        PromptSet(table=pl.DataFrame({"prompt": ["a"]}), dropped={}, format="plain")
