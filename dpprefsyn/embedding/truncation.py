"""Tail-preserving truncation of (prefix, response) pairs to a model's token window.

Models truncate on the right, which for a long dialogue drops the response: HH-RLHF prompts
are whole dialogues, and with a 256-token window about one pair in ten then gets the same
embedding for its chosen and its rejected response. Here the response is kept and the *start*
of the prefix is dropped instead; the cut is made on the strings, at token boundaries found
from the tokenizer's offset mappings, so the text that is embedded (and hashed for the cache)
is exactly the text that the model sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["CHARS_PER_TOKEN", "clip_head", "clip_tail", "truncate_pairs"]

CHARS_PER_TOKEN = 64
"""Characters kept per token of budget before a text is tokenized at all.

Tokenizing a 10 MB response with offsets takes half a minute and gigabytes of memory, only to
keep its first few hundred tokens. Texts are first cut to ``CHARS_PER_TOKEN`` characters per
token of budget, at white space, so no kept word is split: English averages about four
characters a token, so the kept tokens are those of the uncut text. Only a text whose tokens
average more than this (a base64 blob, a run of one character) is embedded from its cut head,
still bounded and deterministic.
"""


def clip_head(text: str, max_chars: int) -> str:
    """The start of ``text``, at most ``max_chars`` long, cut at white space where it can be."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return head[:cut] if cut > max_chars // 2 else head


def clip_tail(text: str, max_chars: int) -> str:
    """The end of ``text``, at most ``max_chars`` long, cut at white space where it can be."""
    if len(text) <= max_chars:
        return text
    tail = text[-max_chars:]
    found = [i for i in (tail.find(" "), tail.find("\n"), tail.find("\t")) if i >= 0]
    cut = min(found, default=-1)
    return tail[cut:] if 0 <= cut < max_chars // 2 else tail


def _offsets(tokenizer: Any, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
    """Character span of every token of each text, without special tokens."""
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError("tail-preserving truncation needs a fast tokenizer (offset mappings)")
    # verbose=False: over-long texts are the point here, not a mistake to warn about.
    encoded = tokenizer(
        list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False
    )
    return encoded["offset_mapping"]


def _n_tokens(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    return [
        len(ids)
        for ids in tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    ]


def _cut(
    prefix: str,
    prefix_offsets: Sequence[tuple[int, int]],
    n_prefix: int,
    response: str,
    response_offsets: Sequence[tuple[int, int]],
    n_response: int,
) -> str:
    """Join the last ``n_prefix`` prefix tokens and the first ``n_response`` response tokens."""
    # A part kept whole is kept verbatim, spaces around it included, so that a pair that fits
    # is embedded (and cached) as exactly ``prefix + response``.
    if n_prefix < len(prefix_offsets):
        prefix = prefix[prefix_offsets[-n_prefix][0] :] if n_prefix > 0 else ""
    if n_response < len(response_offsets):
        response = response[: response_offsets[n_response - 1][1]] if n_response > 0 else ""
    return prefix + response


def truncate_pairs(
    tokenizer: Any, prefixes: Sequence[str], responses: Sequence[str], max_tokens: int
) -> list[str]:
    """Join each prefix and response into a text of at most ``max_tokens`` tokens.

    A pair that fits is joined as it is. Otherwise all of the response that fits is kept (its
    head if the response alone is too long) and the rest of the budget goes to the *end* of the
    prefix, the turns nearest to the response.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerFast
        The model's tokenizer; a fast one, for its offset mappings.
    prefixes, responses : sequence of str
        The two parts written by :meth:`~dpprefsyn.templates.PromptTemplate.render`.
    max_tokens : int
        Budget in tokens, not counting the special tokens the model adds (``[CLS]``, ``[SEP]``).

    Returns
    -------
    list of str
        One text per pair, each within the budget once tokenized.
    """
    if len(prefixes) != len(responses):
        raise ValueError(f"{len(prefixes)} prefixes but {len(responses)} responses")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if not prefixes:
        return []  # tokenizers reject an empty batch
    limit = max_tokens * CHARS_PER_TOKEN
    prefixes = [clip_tail(p, limit) for p in prefixes]
    responses = [clip_head(r, limit) for r in responses]
    prefix_offsets = _offsets(tokenizer, prefixes)
    response_offsets = _offsets(tokenizer, responses)
    budgets: list[tuple[int, int]] = []
    texts: list[str] = []
    for prefix, p_off, response, r_off in zip(
        prefixes, prefix_offsets, responses, response_offsets, strict=True
    ):
        n_response = min(len(r_off), max_tokens)
        n_prefix = min(len(p_off), max_tokens - n_response)
        budgets.append((n_prefix, n_response))
        texts.append(_cut(prefix, p_off, n_prefix, response, r_off, n_response))

    # Tokens can merge or split across the cut and the join (a word cut mid-way, a BPE space),
    # so the joined text is counted again, and shortened further until it fits.
    lengths = _n_tokens(tokenizer, texts)
    for i, length in enumerate(lengths):
        n_prefix, n_response = budgets[i]
        while length > max_tokens:
            excess = length - max_tokens
            if n_prefix > 0:
                n_prefix = max(0, n_prefix - excess)
            else:
                n_response = max(0, n_response - excess)
            texts[i] = _cut(
                prefixes[i],
                prefix_offsets[i],
                n_prefix,
                responses[i],
                response_offsets[i],
                n_response,
            )
            (length,) = _n_tokens(tokenizer, [texts[i]])
    return texts
