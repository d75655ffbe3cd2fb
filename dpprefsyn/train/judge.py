"""A local pairwise judge: which of two responses is better, read from next-token probabilities.

The judge is any causal LM (an instruct model such as Qwen2.5-7B-Instruct on a GPU). It is shown
the instruction and two responses labelled ``A`` and ``B`` and asked to answer with one label.
Instead of generating and parsing free text, the probabilities it gives the two label tokens at
the next position are read and renormalised, as AlpacaEval 2 reads its judge's log-probabilities:
every verdict is a probability, and a judge that would have rambled still gives one. How much
probability the judge put on the two labels at all (``label_mass``) tells whether it understood
the question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from dpprefsyn.train.modeling import chat_texts, encoded_batches, load_causal_lm

JUDGE_TEMPLATE = """\
You are a helpful assistant who compares the answers of two AI assistants to the same \
instruction.

Select the answer that follows the instruction better: it should be helpful, accurate, honest \
and harmless, at the level of detail the instruction asks for. Do not let the order of the \
answers, their length or their style sway you.

# Instruction

{instruction}

# Answer A

{output_a}

# Answer B

{output_b}

# Verdict

Which answer is better? Reply with a single letter: A or B."""
"""Pairwise judge prompt in AlpacaEval / MT-Bench wording; fields ``{instruction}``,
``{output_a}``, ``{output_b}``. With a chat template it is the user turn; without one it is the
whole input, so a base-model judge wants a template ending in something like ``Verdict:``."""

TEMPLATE_FIELDS = ("instruction", "output_a", "output_b")
_FIELD = re.compile(r"\{(" + "|".join(TEMPLATE_FIELDS) + r")\}")


@runtime_checkable
class PairwiseJudge(Protocol):
    """What the win-rate runner needs of a judge: one probability per comparison."""

    def prob_first_better(
        self, instructions: Sequence[str], first: Sequence[str], second: Sequence[str]
    ) -> np.ndarray:
        """Probability that ``first[i]`` answers ``instructions[i]`` better than ``second[i]``."""


def check_template(template: str) -> str:
    """Return ``template`` if each of :data:`TEMPLATE_FIELDS` appears in it exactly once."""
    counts = {name: 0 for name in TEMPLATE_FIELDS}
    for match in _FIELD.finditer(template):
        counts[match.group(1)] += 1
    wrong = [f"{{{name}}}" for name, count in counts.items() if count != 1]
    if wrong:
        raise ValueError(f"the judge template must hold each of {', '.join(wrong)} exactly once")
    return template


def fill_template(template: str, instruction: str, output_a: str, output_b: str) -> str:
    """Substitute the three fields in one pass: braces in the texts are left alone."""
    values = {"instruction": instruction, "output_a": output_a, "output_b": output_b}
    return _FIELD.sub(lambda match: values[match.group(1)], template)


def label_token_ids(tokenizer: Any, label: str) -> list[int]:
    """Ids of the single tokens that spell ``label`` as the next token, with or without a space.

    BPE vocabularies hold both ``A`` and ``ĠA``; which one a judge emits depends on what
    precedes it, so the label's probability is the sum over both.
    """
    ids: list[int] = []
    for variant in (label, " " + label):
        tokens = tokenizer.encode(variant, add_special_tokens=False)
        if tokens and tokenizer.decode(tokens[:1]).strip() == label and tokens[0] not in ids:
            ids.append(tokens[0])
    return ids


def label_ids(tokenizer: Any, labels: Sequence[str]) -> tuple[list[int], list[int]]:
    """Token ids of each of the two labels; an error where the judge could not answer with one.

    Raises
    ------
    ValueError
        Not two different labels, a label that is not one token of the vocabulary, or two labels
        that share a token.
    """
    if len(labels) != 2 or labels[0] == labels[1]:
        raise ValueError(f"labels must be two different strings, got {labels!r}")
    ids = (label_token_ids(tokenizer, labels[0]), label_token_ids(tokenizer, labels[1]))
    for label, found in zip(labels, ids, strict=True):
        if not found:
            raise ValueError(
                f"label {label!r} is not a single token of the judge's vocabulary, so its "
                "probability cannot be read; choose other labels (and a matching template)"
            )
    if set(ids[0]) & set(ids[1]):
        raise ValueError(f"labels {tuple(labels)} share a token: the judge cannot tell them apart")
    return ids


class LocalJudge:
    """A causal LM asked which of two answers is better; its next-token label odds decide.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Any causal LM: called as ``model(input_ids=..., attention_mask=...).logits``.
    tokenizer : transformers.PreTrainedTokenizerBase
    template : str, default=JUDGE_TEMPLATE
        The judge prompt; see :data:`JUDGE_TEMPLATE` for its fields.
    labels : pair of str, default=("A", "B")
        What the template asks the judge to answer for the first and the second answer. Each
        must be a single token of the judge's vocabulary.
    batch_size : int, default=4
        Comparisons per forward pass.
    chat_template : bool or None, default=None
        Send the prompt as a user turn through the tokenizer's chat template; None does so when
        the tokenizer has one.
    progress : bool, default=False
        Show a progress bar.

    Raises
    ------
    ValueError
        A label is not one token of the vocabulary, the two labels share a token, or the
        template lacks a field.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        template: str = JUDGE_TEMPLATE,
        labels: Sequence[str] = ("A", "B"),
        batch_size: int = 4,
        chat_template: bool | None = None,
        progress: bool = False,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.template = check_template(template)
        self.labels = tuple(labels)
        self.batch_size = batch_size
        self.chat_template = chat_template
        self.progress = progress
        self.label_ids = label_ids(tokenizer, self.labels)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | Path,
        *,
        dtype: str | None = None,
        device_map: str | None = None,
        **kwargs: Any,
    ) -> LocalJudge:
        """Load the judge model (bfloat16 over the GPUs with CUDA, float32 on the CPU)."""
        model, tokenizer = load_causal_lm(name_or_path, dtype=dtype, device_map=device_map)
        return cls(model, tokenizer, **kwargs)

    def prob_first_better(
        self, instructions: Sequence[str], first: Sequence[str], second: Sequence[str]
    ) -> np.ndarray:
        """Probability that the first answer (shown as label A) is the better one."""
        return self.scores(instructions, first, second)[0]

    def scores(
        self, instructions: Sequence[str], first: Sequence[str], second: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """``P(A) / (P(A) + P(B))`` and ``P(A) + P(B)`` of each comparison, in order."""
        if not len(instructions) == len(first) == len(second):
            raise ValueError("instructions, first and second must have the same length")
        texts = [
            fill_template(self.template, *triple)
            for triple in zip(instructions, first, second, strict=True)
        ]
        texts, special = chat_texts(self.tokenizer, texts, chat_template=self.chat_template)
        return self.label_probabilities(texts, add_special_tokens=special)

    @torch.no_grad()
    def label_probabilities(
        self, texts: Sequence[str], *, add_special_tokens: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Renormalised probability of the first label after each text, and the labels' mass.

        Batches are right-padded (positions stay those of an unpadded text) and grouped by
        length; the logits are read at each text's last real token.
        """
        device = getattr(self.model, "device", None) or next(self.model.parameters()).device
        ids_a, ids_b = (torch.tensor(ids) for ids in self.label_ids)
        p_first = np.empty(len(texts))
        mass = np.empty(len(texts))
        batches = encoded_batches(
            self.tokenizer,
            texts,
            batch_size=self.batch_size,
            padding_side="right",
            add_special_tokens=add_special_tokens,
            device=device,
            desc="judge",
            progress=self.progress,
        )
        for batch, enc in batches:
            logits = self.model(
                input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]
            ).logits
            # With the weights spread over GPUs the logits come out on the last one.
            last = (enc["attention_mask"].sum(dim=1) - 1).to(logits.device)
            rows = torch.arange(len(batch), device=logits.device)
            logps = logits[rows, last].float().log_softmax(dim=-1).cpu()
            a, b = logps[:, ids_a].logsumexp(dim=-1), logps[:, ids_b].logsumexp(dim=-1)
            p_first[batch] = torch.sigmoid(a - b).numpy()
            mass[batch] = torch.logaddexp(a, b).exp().numpy()
        return p_first, mass
