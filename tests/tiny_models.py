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
    """Write a tiny GPT-2 and its word-level tokenizer to ``directory`` and return it.

    The result loads with ``AutoTokenizer.from_pretrained`` and
    ``AutoModelForCausalLM.from_pretrained``. ``pad_token`` is set, so batched generation and
    training work without further setup.
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<eos>", "<|user|>", "<|assistant|>"]
    backend = Tokenizer(models.WordLevel(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.train_from_iterator(CORPUS, trainers.WordLevelTrainer(special_tokens=specials))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<eos>",
        bos_token="<eos>",
    )
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = GPT2LMHeadModel(config)
    directory = Path(directory)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
