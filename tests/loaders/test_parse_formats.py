"""Each format's parsing rules, and auto detection picking it, on small hand-made records."""

from __future__ import annotations

import pytest

from dpprefsyn.errors import DataError
from dpprefsyn.loaders import load_preferences

H, A = "\n\nHuman:", "\n\nAssistant:"


def _rows(data) -> list[tuple[str, str, str, str]]:
    return data.table.rows()


# --- conversational -------------------------------------------------------------------------


def _msg(role: str, content: str) -> dict[str, str]:
    return {"role": role, "content": content}


def test_conversational_explicit_prompt(write_jsonl):
    record = {
        "prompt": [_msg("system", "Be brief."), _msg("user", "Capital of France?")],
        "chosen": [_msg("assistant", "Paris.")],
        "rejected": [_msg("assistant", "Lyon.")],
    }
    data = load_preferences(write_jsonl("conv.jsonl", [record]))
    assert data.format == "conversational"
    assert _rows(data) == [
        ("conv.jsonl:0", "System: Be brief.\n\nHuman: Capital of France?", "Paris.", "Lyon.")
    ]


def test_conversational_implicit_prompt_is_the_shared_start(write_jsonl):
    shared = [_msg("user", "Hi"), _msg("assistant", "Hello"), _msg("user", "2+2?")]
    record = {
        "chosen": [*shared, _msg("assistant", "4")],
        "rejected": [*shared, _msg("assistant", "5"), _msg("user", "sure?")],
    }
    data = load_preferences(write_jsonl("conv.jsonl", [record]))
    assert data.format == "conversational"
    assert _rows(data) == [
        ("conv.jsonl:0", "Human: Hi\n\nAssistant: Hello\n\nHuman: 2+2?", "4", "5")
    ]


@pytest.mark.parametrize(
    ("record", "field", "kind"),
    [
        ({"chosen": "text", "rejected": []}, "chosen", "bad_messages"),
        ({"chosen": [_msg("user", "q")], "rejected": [7]}, "rejected[0]", "bad_messages"),
        (
            {"chosen": [{"role": "user"}], "rejected": [_msg("user", "q")]},
            "chosen[0].content",
            "missing_field",
        ),
        (
            {"chosen": [_msg("robot", "q")], "rejected": [_msg("user", "q")]},
            "chosen[0].role",
            "unknown_role",
        ),
        (
            {
                "chosen": [_msg("user", "q"), _msg("assistant", "a")],
                "rejected": [_msg("user", "q")],
            },
            "rejected",
            "no_assistant_message",
        ),
        (
            {
                "chosen": [_msg("user", "q"), _msg("assistant", " ")],
                "rejected": [_msg("user", "q"), _msg("assistant", "b")],
            },
            "chosen[1].content",
            "empty_response",
        ),
        (
            {"chosen": [_msg("assistant", "a")], "rejected": [_msg("assistant", "b")]},
            "chosen",
            "empty_prompt",
        ),
    ],
)
def test_conversational_errors(write_jsonl, record, field, kind):
    with pytest.raises(DataError) as info:
        load_preferences(write_jsonl("conv.jsonl", [record]), format="conversational")
    assert (info.value.record, info.value.field, info.value.kind) == ("conv.jsonl:0", field, kind)


# --- hh-rlhf --------------------------------------------------------------------------------


def test_hh_rlhf_splits_at_the_last_assistant_turn(write_jsonl):
    prompt = f"{H} Hi{A} Hello!{H} Tell me a joke.{A}"
    record = {"chosen": f"{prompt} Why did the chicken...  ", "rejected": f"{prompt} No."}
    data = load_preferences(write_jsonl("hh.jsonl", [record]))
    assert data.format == "hh-rlhf"
    assert _rows(data) == [("hh.jsonl:0", prompt, "Why did the chicken...", "No.")]


@pytest.mark.parametrize(
    ("record", "field", "kind"),
    [
        ({"chosen": f"{H} Hi", "rejected": f"{H} Hi{A} b"}, "chosen", "no_assistant_turn"),
        ({"chosen": f"{H} Hi{A} a", "rejected": f"{H} Ho{A} b"}, "rejected", "prefix_mismatch"),
        ({"chosen": f"{H} Hi{A} ", "rejected": f"{H} Hi{A} b"}, "chosen", "empty_response"),
        (
            {"chosen": f"{H} Hi{A} a", "rejected": f"{H} Hi{A}  a "},
            "rejected",
            "identical_responses",
        ),
    ],
)
def test_hh_rlhf_errors(write_jsonl, record, field, kind):
    with pytest.raises(DataError) as info:
        load_preferences(write_jsonl("hh.jsonl", [record]), format="hh-rlhf")
    assert (info.value.field, info.value.kind) == (field, kind)


# --- oasst ----------------------------------------------------------------------------------


def _node(message_id: str, role: str, text: str, rank: int | None = None, replies=()) -> dict:
    node = {"message_id": message_id, "role": role, "text": text, "replies": list(replies)}
    if rank is not None:
        node["rank"] = rank
    return node


def test_oasst_pairs_adjacent_ranks_with_the_thread_as_prompt(write_jsonl):
    deep = [_node("d0", "assistant", "deep best", 0), _node("d1", "assistant", "deep worst", 1)]
    tree = _node(
        "root",
        "prompter",
        "Question?",
        replies=[
            _node("a2", "assistant", "third", 2),
            _node(
                "a0", "assistant", "first", 0, [_node("f", "prompter", "Follow-up?", replies=deep)]
            ),
            _node("a1", "assistant", "second", 1),
            _node("unranked", "assistant", "not ranked"),
        ],
    )
    data = load_preferences(write_jsonl("trees.jsonl", [{"message_tree_id": "t", "prompt": tree}]))
    assert (data.format, data.n_read, data.dropped) == ("oasst", 1, {})
    assert _rows(data) == [
        ("oasst:a0", "Human: Question?", "first", "second"),
        ("oasst:a1", "Human: Question?", "second", "third"),
        (
            "oasst:d0",
            "Human: Question?\n\nAssistant: first\n\nHuman: Follow-up?",
            "deep best",
            "deep worst",
        ),
    ]


def test_oasst_equal_ranks_are_ties(write_jsonl):
    replies = [_node(f"a{i}", "assistant", f"answer {i}", rank) for i, rank in enumerate([0, 0, 1])]
    tree = _node("root", "prompter", "Question?", replies=replies)
    data = load_preferences(write_jsonl("trees.jsonl", [{"prompt": tree}]))
    assert (len(data), data.dropped) == (1, {"tie": 1})


@pytest.mark.parametrize(
    ("tree", "field", "kind"),
    [
        (_node("r", "prompter", "Q", replies=["x"]), "prompt.replies[0]", "bad_tree"),
        ({**_node("r", "prompter", "Q"), "replies": {}}, "prompt.replies", "bad_tree"),
        (
            _node(
                "r", "prompter", "Q", replies=[_node("a", "assistant", "A", rank=0) | {"rank": "0"}]
            ),
            "prompt.replies[0].rank",
            "bad_rank",
        ),
        (_node("r", "prompter", None), "prompt.text", "not_a_string"),
        (_node("r", "wizard", "Q"), "prompt.role", "unknown_role"),
    ],
)
def test_oasst_errors(write_jsonl, tree, field, kind):
    with pytest.raises(DataError) as info:
        load_preferences(write_jsonl("trees.jsonl", [{"prompt": tree}]), format="oasst")
    assert (info.value.record, info.value.field, info.value.kind) == ("trees.jsonl:0", field, kind)


# --- pairwise -------------------------------------------------------------------------------


def _pandalm(votes: tuple[int, int, int], response1: object = "one", task_input: str = "") -> dict:
    return {
        "instruction": "Rewrite.",
        "input": task_input,
        "response1": response1,
        "response2": "two",
        **{f"annotator{i}": vote for i, vote in enumerate(votes, start=1)},
    }


@pytest.mark.parametrize(
    ("votes", "chosen"),
    [
        ((1, 1, 1), "one"),
        ((2, 2, 1), "two"),
        ((0, 0, 2), "two"),  # the only non-tie label wins
        ((0, 1, 1), "one"),
        ((0, 0, 0), None),  # all ties
        ((0, 1, 2), None),  # no majority
    ],
)
def test_pandalm_majority_of_non_tie_labels(write_jsonl, votes, chosen):
    path = write_jsonl("pandalm.jsonl", [_pandalm(votes), _pandalm((1, 1, 1))])
    data = load_preferences(path)
    assert data.format == "pairwise"
    if chosen is None:
        assert (len(data), data.dropped) == (1, {"tie": 1})
    else:
        assert data.table["chosen"][0] == chosen
        assert data.table["rejected"][0] == ({"one", "two"} - {chosen}).pop()


def test_pandalm_prompt_joins_instruction_and_input(write_jsonl):
    data = load_preferences(write_jsonl("p.jsonl", [_pandalm((1, 1, 1), task_input="Some text.")]))
    assert data.table["prompt"].to_list() == ["Rewrite.\n\nSome text."]


def test_pairwise_errors_name_the_source_field(write_jsonl):
    with pytest.raises(DataError) as info:
        load_preferences(write_jsonl("p.jsonl", [_pandalm((1, 1, 0), response1=True)]))
    assert (info.value.field, info.value.kind) == ("response1", "not_a_string")
    with pytest.raises(DataError) as info:
        load_preferences(write_jsonl("p.jsonl", [_pandalm((1, True, 1))]))
    assert (info.value.field, info.value.kind) == ("annotator2", "bad_label")


def test_llmbar(write_jsonl):
    rows = [
        {"input": "Sum 2+2.", "output_1": "4", "output_2": "5", "label": "1"},
        {"input": "Sum 2+3.", "output_1": "6", "output_2": "5", "label": 2},
    ]
    data = load_preferences(write_jsonl("llmbar.jsonl", rows))
    assert data.format == "pairwise"
    assert [row[1:] for row in _rows(data)] == [("Sum 2+2.", "4", "5"), ("Sum 2+3.", "5", "6")]
    with pytest.raises(DataError) as info:
        load_preferences(write_jsonl("llmbar.jsonl", [{**rows[0], "label": "3"}]))
    assert (info.value.field, info.value.kind) == ("label", "bad_label")


# --- hhh ------------------------------------------------------------------------------------


def _graded(instruction: str, response: str) -> str:
    return (
        "###Task Description:\nGrade it.\n\n###The instruction to evaluate:\n"
        f"{instruction}\n\n###Response to evaluate:\n{response}\n\n###Score Rubrics:\n[Ok?]\n"
    )


def test_hhh_unwraps_the_grading_template(write_jsonl):
    record = {
        "source": "harmless",
        "chosen_instruction": _graded("Help me.\n\nPlease.", "Sure."),
        "rejected_instruction": _graded("Help me.\n\nPlease.", "No."),
    }
    data = load_preferences(write_jsonl("hhh.jsonl", [record]))
    assert data.format == "hhh"
    assert _rows(data) == [("hhh.jsonl:0", "Help me.\n\nPlease.", "Sure.", "No.")]
    for broken, kind in [
        ({**record, "rejected_instruction": "free text"}, "template_mismatch"),
        ({**record, "rejected_instruction": _graded("Other.", "No.")}, "instruction_mismatch"),
    ]:
        with pytest.raises(DataError) as info:
            load_preferences(write_jsonl("hhh.jsonl", [broken]))
        assert (info.value.field, info.value.kind) == ("rejected_instruction", kind)


# --- detection ------------------------------------------------------------------------------


def test_detection_outvotes_a_malformed_first_record(write_jsonl, good_record):
    path = write_jsonl("p.jsonl", [b"{broken", {"prompt": "p"}, good_record, good_record])
    data = load_preferences(path, on_error="drop")
    assert (data.format, len(data), data.dropped) == (
        "preference",
        2,
        {"broken_json": 1, "missing_field": 1},
    )


def test_detection_failure_lists_what_it_saw_but_no_text(write_jsonl, canary):
    path = write_jsonl("odd.jsonl", [{"question": canary, "answer": [canary]}, [canary]])
    with pytest.raises(DataError, match="cannot tell the format") as info:
        load_preferences(path)
    message = str(info.value)
    assert "{'answer': list, 'question': string}" in message
    assert "pairwise:" in message and "format=" in message
    assert canary not in message


def test_detection_tie_between_formats_is_an_error(write_jsonl, good_record):
    pandalm = _pandalm((1, 1, 1))
    with pytest.raises(DataError, match="cannot tell the format"):
        load_preferences(write_jsonl("mixed.jsonl", [good_record, pandalm]))


def test_oasst_message_id_in_two_trees_is_a_duplicate(write_jsonl):
    replies = [_node("a", "assistant", "yes", 0), _node("b", "assistant", "no", 1)]
    tree = {"prompt": _node("root", "prompter", "Question?", replies=replies)}
    path = write_jsonl("trees.jsonl", [tree, tree])
    with pytest.raises(DataError) as info:
        load_preferences(path)
    assert (info.value.record, info.value.kind) == ("oasst:a", "duplicate_id")
    assert load_preferences(path, on_error="drop").dropped == {"duplicate_id": 1}
