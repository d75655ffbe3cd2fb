"""Prompt templates: presets, HH dialogues left unwrapped, custom format strings."""

from __future__ import annotations

import dataclasses

import pytest

from dpprefsyn.templates import TEMPLATES, PromptTemplate, get_template

HH_PROMPT = (
    "\n\nHuman: How do I bake bread?\n\nAssistant: Flour and water.\n\nHuman: Then?\n\nAssistant:"
)


def test_presets_render_prefix_and_response_apart():
    assert get_template("dialogue").render("Hi", "Hello") == ("Human: Hi\n\nAssistant: ", "Hello")
    assert get_template("summarisation").render("Text.", "Short.") == (
        "Text.\n\nSummary: ",
        "Short.",
    )
    assert get_template("plain").render("Q", "A") == ("Q\n\n", "A")
    assert set(TEMPLATES) == {"dialogue", "summarisation", "plain"}


def test_dialogue_does_not_wrap_an_hh_dialogue_again():
    prefix, response = get_template("dialogue").render(HH_PROMPT, "Knead it.")
    assert prefix == HH_PROMPT + " "
    assert prefix.count("Human:") == 2
    assert response == "Knead it."


def test_dialogue_wraps_text_that_merely_ends_with_assistant():
    prefix, _ = get_template("dialogue").render("Who is the Assistant:", "Me.")
    assert prefix == "Human: Who is the Assistant:\n\nAssistant: "


def test_custom_format_string_and_braces_in_text_are_literal():
    template = get_template("Q: {prompt}\nA: ")
    assert template.name == "custom"
    assert template.render("use {x}", "{y} here") == ("Q: use {x}\nA: ", "{y} here")


def test_template_instance_passes_through_and_is_frozen():
    template = PromptTemplate("mine", "<{prompt}>", "[{response}]")
    assert get_template(template) is template
    assert template.render("p", "r") == ("<p>", "[r]")
    with pytest.raises(dataclasses.FrozenInstanceError):
        template.name = "other"


@pytest.mark.parametrize("bad", ["nonsense", "{text}", ""])
def test_unknown_name_or_format_is_rejected(bad):
    with pytest.raises(ValueError, match="unknown template"):
        get_template(bad)


@pytest.mark.parametrize(
    ("prefix_format", "response_format"),
    [
        ("{prompt} {other}", "{response}"),
        ("{prompt}", "x"),
        ("{prompt", "{response}"),
        ("{}", "{response}"),
    ],
)
def test_malformed_templates_fail_at_construction(prefix_format, response_format):
    with pytest.raises(ValueError):
        PromptTemplate("bad", prefix_format, response_format)
