"""Render a list of chat turns as one plain-text prompt.

Formats that store messages (``conversational``, ``oasst``) need a text prompt in the table; one
rendering, in the spirit of HH-RLHF's ``Human:``/``Assistant:`` transcripts, keeps them alike.
"""

from __future__ import annotations

from collections.abc import Sequence

ROLE_NAMES: dict[str, str] = {
    "system": "System",
    "user": "Human",
    "prompter": "Human",
    "assistant": "Assistant",
    "tool": "Tool",
}
"""Source role -> speaker name in the rendered text (``prompter`` is OpenAssistant's user)."""


def render_turns(turns: Sequence[tuple[str, str]]) -> str:
    r"""Join ``(role, text)`` turns as ``"Human: ...\n\nAssistant: ..."``; roles must be known."""
    return "\n\n".join(f"{ROLE_NAMES[role]}: {text}" for role, text in turns)
