"""Prompt templates: how a (prompt, response) pair is written out as one text to embed.

The embedder sees psi(x, a) as the text ``prefix + response``. A template returns the two parts
separately so that, when the pair is longer than the model's window, the embedder can drop the
*start* of the prefix and keep the response, which is what tells chosen from rejected.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

__all__ = ["PromptTemplate", "TEMPLATES", "get_template"]

_HH_ASSISTANT_TURN = "Assistant:"
_HH_HUMAN_TURN = "Human:"


def _format_fields(format_string: str) -> set[str]:
    """Names of the replacement fields of a ``str.format`` string (raises on a malformed one)."""
    return {
        field for _, field, _, _ in string.Formatter().parse(format_string) if field is not None
    }


@dataclass(frozen=True)
class PromptTemplate:
    r"""A way of writing a (prompt, response) pair as text for the embedding model.

    Parameters
    ----------
    name : str
        Short name, recorded with the embeddings so that a run says how its texts were written.
    prefix_format : str
        ``str.format`` string with exactly one field, ``{prompt}``; the response follows it
        directly, so it usually ends with a separator such as ``"\n\nAssistant: "``.
    response_format : str, default="{response}"
        ``str.format`` string with exactly one field, ``{response}``.

    Examples
    --------
    >>> PromptTemplate("qa", "Q: {prompt}\nA: ").render("Why?", "Because.")
    ('Q: Why?\nA: ', 'Because.')
    """

    name: str
    prefix_format: str
    response_format: str = "{response}"

    def __post_init__(self) -> None:
        """Check the formats now, so a bad custom template fails before any model loads.

        Only the named fields are allowed, which also rejects ``{0}`` and ``{}``.
        """
        for attr, field in (("prefix_format", "prompt"), ("response_format", "response")):
            value = getattr(self, attr)
            try:
                fields = _format_fields(value)
            except ValueError as err:
                raise ValueError(f"{attr} is not a valid format string: {err}") from None
            if fields != {field}:
                raise ValueError(
                    f"{attr} must contain exactly the field {{{field}}}, found {sorted(fields)}"
                )

    def render(self, prompt: str, response: str) -> tuple[str, str]:
        """Write a pair as ``(prefix, response_text)``; the text embedded is their concatenation.

        Parameters
        ----------
        prompt : str
            The prompt, or a whole earlier dialogue.
        response : str
            The response to the prompt.

        Returns
        -------
        prefix : str
            Everything before the response; the part that may lose its start to truncation.
        response_text : str
            The response as written by ``response_format``.
        """
        return self.prefix_format.format(prompt=prompt), self.response_format.format(
            response=response
        )


@dataclass(frozen=True)
class _DialogueTemplate(PromptTemplate):
    r"""Human/Assistant template that leaves an HH-RLHF-style dialogue as it is.

    HH-RLHF prompts are already the dialogue up to the last ``"\n\nAssistant:"``; wrapping them
    again would embed a dialogue nested in a dialogue, unlike anything the model saw.
    """

    def render(self, prompt: str, response: str) -> tuple[str, str]:
        """Use a prompt that already ends on an Assistant turn as is, followed by a space."""
        stripped = prompt.rstrip()
        if _HH_HUMAN_TURN in stripped and stripped.endswith(_HH_ASSISTANT_TURN):
            return stripped + " ", self.response_format.format(response=response)
        return super().render(prompt, response)


TEMPLATES: dict[str, PromptTemplate] = {
    "dialogue": _DialogueTemplate("dialogue", "Human: {prompt}\n\nAssistant: "),
    "summarisation": PromptTemplate("summarisation", "{prompt}\n\nSummary: "),
    "plain": PromptTemplate("plain", "{prompt}\n\n"),
}
"""Preset templates by name: ``dialogue`` (HH-RLHF style), ``summarisation`` and ``plain``."""


def get_template(template: str | PromptTemplate) -> PromptTemplate:
    r"""Resolve a preset name, a custom format string or a template to a :class:`PromptTemplate`.

    Parameters
    ----------
    template : str or PromptTemplate
        A key of :data:`TEMPLATES`, or a prefix format string containing ``{prompt}`` (named
        ``"custom"``), or a template, returned as it is.

    Returns
    -------
    PromptTemplate

    Raises
    ------
    ValueError
        If a string is neither a preset name nor a format string with ``{prompt}``.

    Examples
    --------
    >>> get_template("plain").render("Hi", "Hello")
    ('Hi\n\n', 'Hello')
    >>> get_template("Question: {prompt}\nAnswer: ").name
    'custom'
    """
    if isinstance(template, PromptTemplate):
        return template
    if template in TEMPLATES:
        return TEMPLATES[template]
    if "{prompt}" in template:
        return PromptTemplate("custom", template)
    raise ValueError(
        f"unknown template {template!r}: use one of {sorted(TEMPLATES)} "
        "or a format string containing '{prompt}'"
    )
