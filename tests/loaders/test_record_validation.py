"""The checks every format shares: bad records are raised with record and field, or counted."""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dpprefsyn.errors import DataError
from dpprefsyn.loaders import FORMATS, load_preferences
from dpprefsyn.loaders.records import Pair, check_pair

CANARY = "canary-93b2d7-private-text"
GOOD = {"prompt": f"Say hello. {CANARY}", "chosen": f"Hello! {CANARY}", "rejected": f"Go. {CANARY}"}

MALFORMED = [
    # (line as written, field, kind)
    (
        json.dumps({"prompt": GOOD["prompt"], "chosen": GOOD["chosen"]}).encode(),
        "rejected",
        "missing_field",
    ),
    (json.dumps({**GOOD, "chosen": None}).encode(), "chosen", "not_a_string"),
    (json.dumps({**GOOD, "rejected": 42}).encode(), "rejected", "not_a_string"),
    (json.dumps({**GOOD, "prompt": [CANARY]}).encode(), "prompt", "not_a_string"),
    (json.dumps({**GOOD, "chosen": ""}).encode(), "chosen", "empty_response"),
    (json.dumps({**GOOD, "rejected": " \n\t"}).encode(), "rejected", "empty_response"),
    (json.dumps({**GOOD, "prompt": "  "}).encode(), "prompt", "empty_prompt"),
    (json.dumps({**GOOD, "rejected": GOOD["chosen"]}).encode(), "rejected", "identical_responses"),
    (f'{{"prompt": "{CANARY}", "chosen": '.encode(), "<record>", "broken_json"),
    (
        json.dumps(GOOD).replace("Hello!", "Hello\\u00ff!").encode().replace(b"\\u00ff", b"\xff"),
        "chosen",
        "not_utf8",
    ),
    (json.dumps([GOOD]).encode(), "<record>", "not_an_object"),
]
IDS = [kind + ":" + field for _, field, kind in MALFORMED]


@pytest.mark.parametrize(("line", "field", "kind"), MALFORMED, ids=IDS)
def test_raise_names_record_and_field_but_no_text(write_jsonl, line, field, kind):
    path = write_jsonl("pairs.jsonl", [GOOD, line, GOOD])
    with pytest.raises(DataError) as info:
        load_preferences(path, format="preference")
    err = info.value
    assert (err.record, err.field, err.kind) == ("pairs.jsonl:1", field, kind)
    assert str(err).startswith(f"record pairs.jsonl:1, field '{field}': ")
    assert CANARY not in str(err)
    assert err.__cause__ is None and err.__suppress_context__  # no json/polars traceback chained


def test_drop_counts_every_reason(write_jsonl):
    lines = [GOOD, *(line for line, _, _ in MALFORMED), GOOD]
    data = load_preferences(write_jsonl("pairs.jsonl", lines), format="preference", on_error="drop")
    assert (len(data), data.n_read) == (2, len(MALFORMED) + 2)
    assert data.dropped == dict(Counter(kind for _, _, kind in MALFORMED))
    assert data.table["record_id"].to_list() == [
        "pairs.jsonl:0",
        f"pairs.jsonl:{len(MALFORMED) + 1}",
    ]
    assert CANARY not in repr(data)
    assert CANARY not in str(data)


def test_undecodable_bytes_in_a_json_list_name_the_field(tmp_path):
    path = tmp_path / "pairs.json"
    path.write_bytes(json.dumps([GOOD, GOOD]).encode().replace(b"Go.", b"G\xfe.", 1))
    with pytest.raises(DataError) as info:
        load_preferences(path)
    assert (info.value.record, info.value.field, info.value.kind) == (
        "pairs.json:0",
        "rejected",
        "not_utf8",
    )


def test_undecodable_bytes_in_csv_name_the_row_and_field(tmp_path):
    path = tmp_path / "pairs.csv"
    pl.DataFrame([GOOD, GOOD]).write_csv(path)
    path.write_bytes(
        path.read_bytes().replace(b"Hello!", b"Hel\xc3lo!", 2).replace(b"Hel\xc3", b"Hell", 1)
    )
    with pytest.raises(DataError) as info:
        load_preferences(path)
    assert (info.value.record, info.value.field, info.value.kind) == (
        "pairs.csv:1",
        "chosen",
        "not_utf8",
    )
    data = load_preferences(path, on_error="drop")
    assert (len(data), data.dropped) == (1, {"not_utf8": 1})


def test_csv_short_row_is_a_missing_field(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("prompt,chosen,rejected\np,a,b\np,a\n")
    with pytest.raises(DataError) as info:
        load_preferences(path)
    assert (info.value.record, info.value.field, info.value.kind) == (
        "pairs.csv:1",
        "rejected",
        "missing_field",
    )


def test_parquet_non_string_column(tmp_path):
    path = tmp_path / "pairs.parquet"
    pl.DataFrame({"prompt": ["p", "q"], "chosen": ["a", None], "rejected": [1, 2]}).write_parquet(
        path
    )
    with pytest.raises(DataError) as info:
        load_preferences(path, format="preference")
    assert (info.value.record, info.value.field, info.value.reason) == (
        "pairs.parquet:0",
        "rejected",
        "expected a string (got number)",
    )


def test_everything_dropped_is_an_error_that_counts(write_jsonl):
    path = write_jsonl("pairs.jsonl", [{**GOOD, "chosen": ""}, b"{"])
    with pytest.raises(DataError, match="no usable pair") as info:
        load_preferences(path, format="preference", on_error="drop")
    assert "'empty_response': 1" in str(info.value) and "'broken_json': 1" in str(info.value)


# --- property: any JSON-ish input gives a valid table or a DataError ------------------------


def _graded(instruction: str, response: str) -> str:
    return (
        f"###The instruction to evaluate:\n{instruction}\n\n"
        f"###Response to evaluate:\n{response}\n\n###Score Rubrics:\n"
    )


_DIALOGUE = "\n\nHuman: q\n\nAssistant: "
_TREE = {
    "message_id": "r",
    "role": "prompter",
    "text": "q",
    "replies": [
        {"message_id": "a", "role": "assistant", "text": "x", "rank": 0, "replies": []},
        {"message_id": "b", "role": "assistant", "text": "y", "rank": 1},
    ],
}
TEMPLATES = [
    {"prompt": "q", "chosen": "a", "rejected": "b"},
    {
        "chosen": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        "rejected": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "b"}],
    },
    {"chosen": _DIALOGUE + "a", "rejected": _DIALOGUE + "b"},
    {"message_tree_id": "t", "prompt": _TREE},
    {"instruction": "q", "input": "", "response1": "a", "response2": "b"}
    | {"annotator1": 1, "annotator2": 2, "annotator3": 0},
    {"input": "q", "output_1": "a", "output_2": "b", "label": "2"},
    {"chosen_instruction": _graded("q", "a"), "rejected_instruction": _graded("q", "b")},
]
"""One valid record per format; the property mutates them so most examples are near-valid."""

_scalars = st.none() | st.booleans() | st.integers(-1, 3) | st.floats(allow_nan=False)
_texts = st.sampled_from(["", " ", "a", "b", "q", "\udcff", _DIALOGUE + CANARY]) | st.text(
    max_size=3
)
_values = st.recursive(
    _scalars | _texts,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_texts, inner, max_size=2),
    max_leaves=4,
)


@st.composite
def _mutated(draw: st.DrawFn, value: object) -> object:
    """``value`` with some of its leaves, list items or object fields replaced or removed."""
    if draw(st.integers(0, 19)) == 0:
        return draw(_values)
    if isinstance(value, dict):
        fields = {}
        for key, item in value.items():
            if draw(st.integers(0, 19)) > 0:
                fields[key] = draw(_mutated(item))
        return fields
    if isinstance(value, list):
        return [draw(_mutated(item)) for item in value]
    return value


_one_format = st.sampled_from(TEMPLATES).flatmap(
    lambda t: st.lists(_mutated(t), min_size=1, max_size=3)
)
_mixed = st.lists(st.sampled_from(TEMPLATES).flatmap(_mutated), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=_one_format | _mixed,
    format=st.just("auto") | st.sampled_from(FORMATS),
    on_error=st.sampled_from(["raise", "drop"]),
)
def test_any_input_gives_valid_rows_or_data_error(records, format, on_error, tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "fuzz.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in records) + "\n")
    try:
        data = load_preferences(path, format=format, on_error=on_error)
    except DataError as err:
        event(f"DataError {getattr(err, 'kind', 'whole source')}")
        return
    event(f"loaded {data.format}")
    assert len(data) > 0
    for row in data.table.rows():
        check_pair(Pair(*row))
    if data.format != "oasst":  # oasst counts trees read but pairs dropped
        assert data.n_read == len(data) + sum(data.dropped.values())
    if on_error == "raise":
        assert set(data.dropped) <= {"tie"}
