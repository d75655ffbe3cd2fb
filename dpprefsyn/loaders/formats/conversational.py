"""TRL's conversational preference format: ``chosen``/``rejected`` are lists of messages.

With an explicit ``prompt`` (a message list) the responses follow it; without one, the messages
``chosen`` and ``rejected`` share from the start are the prompt. Either way a response is the
content of the last assistant message, as TRL's DPO trainer scores it.
"""

from __future__ import annotations

from dpprefsyn.loaders.dialogue import ROLE_NAMES, render_turns
from dpprefsyn.loaders.formats.base import Format
from dpprefsyn.loaders.records import Pair, RecordError, Skip, text_field

Turn = tuple[str, str]


def looks_like(record: dict[str, object]) -> bool:
    """``chosen`` (or ``prompt``) is a list, i.e. holds messages rather than text."""
    return isinstance(record.get("chosen"), list) or isinstance(record.get("prompt"), list)


def _messages(record: dict[str, object], record_id: str, key: str) -> list[Turn]:
    if key not in record:
        raise RecordError(record_id, key, "missing_field")
    messages = record[key]
    if not isinstance(messages, list) or not messages:
        raise RecordError(record_id, key, "bad_messages")
    turns = []
    for index, message in enumerate(messages):
        where = f"{key}[{index}]"
        if not isinstance(message, dict):
            raise RecordError(record_id, where, "bad_messages")
        role = text_field(message, record_id, "role", name=f"{where}.role")
        if role not in ROLE_NAMES:
            raise RecordError(
                record_id, f"{where}.role", "unknown_role", f"expected one of {sorted(ROLE_NAMES)}"
            )
        turns.append((role, text_field(message, record_id, "content", name=f"{where}.content")))
    return turns


def _last_assistant(turns: list[Turn], record_id: str, key: str) -> tuple[str, str]:
    """Content of the last assistant message and the field it came from."""
    for index in range(len(turns) - 1, -1, -1):
        if turns[index][0] == "assistant":
            return turns[index][1], f"{key}[{index}].content"
    raise RecordError(record_id, key, "no_assistant_message")


def _shared_prefix(first: list[Turn], second: list[Turn]) -> list[Turn]:
    size = 0
    while size < min(len(first), len(second)) and first[size] == second[size]:
        size += 1
    return first[:size]


def parse(record_id: str, record: dict[str, object]) -> list[Pair | Skip]:
    """Render the prompt messages as text and take each side's last assistant message."""
    chosen = _messages(record, record_id, "chosen")
    rejected = _messages(record, record_id, "rejected")
    if "prompt" in record:
        prompt, prompt_field = _messages(record, record_id, "prompt"), "prompt"
    else:
        prompt, prompt_field = _shared_prefix(chosen, rejected), "chosen"
    chosen_text, chosen_field = _last_assistant(chosen, record_id, "chosen")
    rejected_text, rejected_field = _last_assistant(rejected, record_id, "rejected")
    return [
        Pair(
            record_id,
            render_turns(prompt),
            chosen_text,
            rejected_text,
            fields=(prompt_field, chosen_field, rejected_field),
        )
    ]


FORMAT = Format(parse, looks_like, "'chosen', 'rejected' (and optional 'prompt') as message lists")
