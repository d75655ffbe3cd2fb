"""A tiny causal language model built offline, for tests that need a real ``transformers`` model.

The hub is unreachable in CI, so the tokenizer is trained here on a few sentences and the model
is a one-layer GPT-2 with random weights: it runs the real generation code in well under a
second, and its outputs are nonsense, which is all a plumbing test needs.
"""

from __future__ import annotations

from pathlib import Path

CORPUS = (
    "the quick brown fox jumps over the lazy dog .",
    "a good answer is short , clear and correct .",
    "write a poem about the sea and the sky .",
    "explain why the sky is blue in one sentence .",
    "what is the capital of france ? paris is the capital .",
    "summarise the document in one line please .",
)
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }} "
    "{% endfor %}{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
"""A minimal chat template, so chat-formatting code paths run too."""


def build_tiny_causal_lm(
    directory: str | Path, *, chat_template: bool = True, seed: int = 0, n_positions: int = 256
) -> Path:
    """Write a one-layer GPT-2 and its word-level tokenizer to ``directory`` and return it.

    The result loads with ``AutoTokenizer.from_pretrained`` and
    ``AutoModelForCausalLM.from_pretrained``.
    """
    from dpprefsyn.train.modeling import build_word_level_gpt2

    return build_word_level_gpt2(
        directory,
        CORPUS,
        n_positions=n_positions,
        chat_template=CHAT_TEMPLATE if chat_template else None,
        seed=seed,
    )
