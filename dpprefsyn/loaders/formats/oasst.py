r"""OpenAssistant message trees (the oasst export format, one tree per record).

Every parent whose assistant replies carry a human ``rank`` (0 = best) gives one pair per
adjacent rank: rank r is chosen over rank r + 1. Adjacent pairs use each human judgement once,
where all pairs would over-weight large sibling sets. The prompt is the thread from the root to
the parent, rendered as ``"Human: ...\n\nAssistant: ..."``. A pair's id is
``"oasst:<message_id of the chosen reply>"``, which is unique because a reply is chosen at most
once. Equal adjacent ranks state no preference and are dropped as ``"tie"``.
"""

from __future__ import annotations

from itertools import pairwise

from dpprefsyn.loaders.dialogue import ROLE_NAMES, render_turns
from dpprefsyn.loaders.formats.base import Format
from dpprefsyn.loaders.records import Pair, RecordError, Skip, text_field

Turn = tuple[str, str]
_PAIR_FIELDS = ("prompt", "chosen.text", "rejected.text")


def looks_like(record: dict[str, object]) -> bool:
    """Recognise a tree: the record's ``prompt`` is a message node (an object), not text."""
    return isinstance(record.get("prompt"), dict)


def _node(value: object, record_id: str, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise RecordError(record_id, where, "bad_tree")
    return value


def _turn(node: dict[str, object], record_id: str, where: str) -> Turn:
    role = text_field(node, record_id, "role", name=f"{where}.role")
    if role not in ROLE_NAMES:
        raise RecordError(record_id, f"{where}.role", "unknown_role")
    return role, text_field(node, record_id, "text", name=f"{where}.text")


def _replies(node: dict[str, object], record_id: str, where: str) -> list[object]:
    replies = node.get("replies", [])
    if not isinstance(replies, list):
        raise RecordError(record_id, f"{where}.replies", "bad_tree")
    return replies


def _ranked(replies: list[object], record_id: str, where: str) -> list[tuple[int, str, str]]:
    """``(rank, message_id, text)`` of the ranked assistant replies, best first."""
    ranked = []
    for index, value in enumerate(replies):
        at = f"{where}.replies[{index}]"
        reply = _node(value, record_id, at)
        role, text = _turn(reply, record_id, at)
        rank = reply.get("rank")
        if role != "assistant" or rank is None:
            continue
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise RecordError(record_id, f"{at}.rank", "bad_rank")
        message_id = text_field(reply, record_id, "message_id", name=f"{at}.message_id")
        ranked.append((rank, message_id, text))
    return sorted(ranked)


def parse(record_id: str, record: dict[str, object]) -> list[Pair | Skip]:
    """Walk the tree depth first (with a stack: depth is data-controlled), pair adjacent ranks."""
    if "prompt" not in record:
        raise RecordError(record_id, "prompt", "missing_field")
    items: list[Pair | Skip] = []
    stack: list[tuple[object, str, tuple[Turn, ...]]] = [(record["prompt"], "prompt", ())]
    while stack:
        value, where, thread = stack.pop()
        node = _node(value, record_id, where)
        turns = (*thread, _turn(node, record_id, where))
        replies = _replies(node, record_id, where)
        ranked = _ranked(replies, record_id, where)
        prompt = render_turns(turns)
        for (rank, chosen_id, chosen), (next_rank, _, rejected) in pairwise(ranked):
            pair_id = f"oasst:{chosen_id}"
            if rank == next_rank:
                items.append(Skip(pair_id, "tie"))
            else:
                items.append(Pair(pair_id, prompt, chosen, rejected, _PAIR_FIELDS))
        children = [(reply, f"{where}.replies[{i}]", turns) for i, reply in enumerate(replies)]
        stack.extend(reversed(children))
    return items


FORMAT = Format(parse, looks_like, "'prompt' as an OpenAssistant tree with ranked 'replies'")
