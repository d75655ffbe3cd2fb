"""Model preparation shared by the trainers and the evaluators: dropout off, LoRA on, loading."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch


def disable_dropout(model: torch.nn.Module) -> None:
    """Set every dropout probability to 0, as TRL does for DPO.

    With dropout on, the policy's log-probs of a pair would be noisy and would not match the
    reference's at step 0, so ``psi`` would not start at 1/2.
    """
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def apply_lora(model: torch.nn.Module, *, r: int, alpha: int) -> torch.nn.Module:
    """Wrap ``model`` in a fresh LoRA adapter on all its linear layers (``peft``).

    The adapter starts at zero, so the wrapped model equals the initial one: the reference
    is the same model with the adapter disabled.
    """
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("use_lora needs peft: pip install 'dpprefsyn[train]'") from err
    config = LoraConfig(r=r, lora_alpha=alpha, target_modules="all-linear", task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def load_causal_lm(
    name_or_path: str | Path, *, dtype: str | None = None, device_map: str | None = None
) -> tuple[Any, Any]:
    """Load a causal LM for inference, and its tokenizer, sized to the machine.

    ``dtype`` None means bfloat16 with CUDA and float32 without; ``device_map`` None means
    ``"auto"`` (accelerate spreads the weights over the GPUs) with CUDA and the CPU without.
    The model is returned in eval mode with gradients off.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cuda = torch.cuda.is_available()
    dtype = dtype or ("bfloat16" if cuda else "float32")
    device_map = device_map or ("auto" if cuda else None)
    tokenizer = AutoTokenizer.from_pretrained(name_or_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(
        name_or_path,
        dtype=dtype if dtype == "auto" else getattr(torch, dtype),
        device_map=device_map,
    )
    return model.eval().requires_grad_(False), tokenizer


def chat_texts(
    tokenizer: Any, messages: list[str], *, chat_template: bool | None
) -> tuple[list[str], bool]:
    """Each message as one user turn ready for the answer, or as it is without a template.

    ``chat_template`` None uses the tokenizer's template when it has one; True insists on it.
    Also returns whether the tokenizer should add its special tokens: not when the template
    has written them already.
    """
    if chat_template is None:
        chat_template = bool(tokenizer.chat_template)
    if not chat_template:
        return list(messages), True
    if not tokenizer.chat_template:
        raise ValueError("chat_template=True but the tokenizer has no chat template")
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": m}], tokenize=False, add_generation_prompt=True
        )
        for m in messages
    ]
    return texts, False


def encoded_batches(
    tokenizer: Any,
    texts: Sequence[str],
    *,
    batch_size: int,
    padding_side: str,
    add_special_tokens: bool,
    device: torch.device | str,
    desc: str,
    progress: bool,
) -> Iterator[tuple[list[int], Any]]:
    """Yield ``(indices, encoding)`` over ``texts`` in padded batches of similar length.

    Sorting by length keeps padding (wasted compute) small; the indices say where each row's
    result belongs. A progress bar counts the batches when ``progress``.
    """
    from tqdm.auto import tqdm

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    for batch in tqdm(batches, desc=desc, disable=not progress):
        encoding = tokenizer(
            [texts[i] for i in batch],
            return_tensors="pt",
            padding=True,
            padding_side=padding_side,
            add_special_tokens=add_special_tokens,
        )
        yield batch, encoding.to(device)


def eos_token_ids(generation_config: Any, tokenizer: Any) -> list[int]:
    """Every id that ends a response: the model's generation EOS ids and the tokenizer's."""
    ids = generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    if not ids:
        raise ValueError("the model has no EOS token: responses could not end")
    return ids


ROLE_TOKENS = ("<|user|>", "<|assistant|>")


def build_word_level_gpt2(
    directory: str | Path,
    texts: Sequence[str],
    *,
    n_layer: int = 1,
    n_embd: int = 32,
    n_head: int = 2,
    n_positions: int = 256,
    chat_template: str | None = None,
    seed: int = 0,
) -> Path:
    """Save a randomly initialised GPT-2 and a word-level tokenizer trained on ``texts``.

    Built from a config, offline: for CPU demos and tests where no hub model can be
    downloaded. Words outside ``texts`` map to ``<unk>``; ``pad_token`` is set, so batched
    training and generation work as they are. A ``chat_template`` (written with
    :data:`ROLE_TOKENS`) adds those tokens to the vocabulary.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<eos>", *(ROLE_TOKENS if chat_template else ())]
    backend = Tokenizer(models.WordLevel(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=specials))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        eos_token="<eos>",
        bos_token="<eos>",
    )
    if chat_template:
        tokenizer.chat_template = chat_template
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    directory = Path(directory)
    GPT2LMHeadModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
