"""Tail-preserving truncation: the response survives, the prefix loses its start."""

from __future__ import annotations

import pytest

from dpprefsyn.embedding import truncate_pairs

BUDGET = 30


def n_tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def test_pair_that_fits_is_joined_verbatim(tokenizer):
    prefix, response = "\n\nHuman: hi there\n\nAssistant: ", "hello  "
    assert truncate_pairs(tokenizer, [prefix], [response], BUDGET) == [prefix + response]


def test_long_prefix_loses_its_start_and_keeps_the_response(tokenizer):
    prefix = " ".join(f"word{i}" for i in range(100)) + "\n\nAssistant: "
    response = "The answer is forty two."
    (text,) = truncate_pairs(tokenizer, [prefix], [response], BUDGET)
    assert text.endswith("Assistant: " + response)
    assert prefix.endswith(text[: -len(response)])
    assert n_tokens(tokenizer, text) <= BUDGET
    assert n_tokens(tokenizer, text) >= BUDGET - 2  # the budget is used, not wasted


def test_response_longer_than_window_keeps_its_head_only(tokenizer):
    response = " ".join(f"token{i}" for i in range(200))
    (text,) = truncate_pairs(tokenizer, ["Human: q\n\nAssistant: "], [response], BUDGET)
    assert response.startswith(text)
    assert 0 < n_tokens(tokenizer, text) <= BUDGET


def test_cut_mid_word_still_fits(tokenizer):
    # Long words split into several word pieces: a cut inside one re-tokenizes differently.
    prefix = "antidisestablishmentarianism " * 40
    (text,) = truncate_pairs(tokenizer, [prefix], ["ok"], 7)
    assert text.endswith("ok")
    assert n_tokens(tokenizer, text) <= 7


def test_input_checks(tokenizer):
    with pytest.raises(ValueError, match="prefixes"):
        truncate_pairs(tokenizer, ["a", "b"], ["c"], BUDGET)
    with pytest.raises(ValueError, match="max_tokens"):
        truncate_pairs(tokenizer, ["a"], ["c"], 0)
