"""Shared benchmark inputs: real preference sets and a public candidate pool, embedded once.

Embeddings are cached on disk (``.cache/embeddings``, git-ignored), so reruns embed nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dpprefsyn.embedding import Embedder
from dpprefsyn.loaders import load_preferences
from dpprefsyn.public_pool import pool_differences
from dpprefsyn.templates import get_template

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
CACHE = ROOT / ".cache" / "embeddings"

PRIVATE_SETS = {
    "hh-harmless": SHARED / "hh-rlhf/harmless-base/test.jsonl.gz",
    "oasst": SHARED / "oasst/en_100_tree.jsonl",
    "pandalm": SHARED / "pandalm/testset-v1.json",
}
POOL_MODELS = (
    "gpt4",
    "claude",
    "alpaca-7b",
    "vicuna-7b",
    "falcon-7b-instruct",
    "llama-2-7b-chat-hf",
)


def embedder(model: str | None = None, max_seq_length: int = 256) -> Embedder:
    return Embedder(model, max_seq_length=max_seq_length, cache_dir=CACHE)


def private_pairs(name: str, emb: Embedder, template: str = "dialogue"):
    """Return (prompts, prompt embeddings, chosen, rejected embeddings) of a real set."""
    data = load_preferences(PRIVATE_SETS[name], on_error="drop")
    t = data.table
    prompts = t["prompt"].to_list()
    tpl = get_template(template)
    ch = emb.encode_pairs(prompts, t["chosen"].to_list(), tpl)
    rj = emb.encode_pairs(prompts, t["rejected"].to_list(), tpl)
    return np.asarray(prompts), emb.encode(prompts), ch, rj


def public_candidates(
    emb: Embedder, n_prompts: int = 300, template: str = "dialogue"
) -> tuple[list[str], list[str], np.ndarray]:
    """AlpacaEval answers by several models: (prompt of each answer, answer, embedding).

    Prompts that AlpacaEval took from HH-RLHF or OASST are left out, so the pool shares no
    prompt with the private sets.
    """
    outputs = {}
    for model in POOL_MODELS:
        path = SHARED / "alpaca-eval/results" / model / "model_outputs.json"
        outputs[model] = json.loads(path.read_text())
    first = outputs[POOL_MODELS[0]]
    keep = [r["instruction"] for r in first if r.get("dataset") not in ("helpful_base", "oasst")][
        :n_prompts
    ]
    keep_set = set(keep)
    prompts, responses = [], []
    for recs in outputs.values():
        for r in recs:
            if (
                r["instruction"] in keep_set
                and isinstance(r.get("output"), str)
                and r["output"].strip()
            ):
                prompts.append(r["instruction"])
                responses.append(r["output"])
    return prompts, responses, emb.encode_pairs(prompts, responses, get_template(template))


def public_pool(emb: Embedder, n_prompts: int = 300, template: str = "dialogue") -> np.ndarray:
    """Within-prompt differences of the public candidates (:func:`public_candidates`)."""
    prompts, _, e = public_candidates(emb, n_prompts, template)
    return pool_differences(e, prompts)


def group_split(prompts: np.ndarray, seed: int, test_fraction: float = 0.2):
    """Train/test masks with every prompt on one side only (PandaLM repeats prompts)."""
    uniq = np.unique(prompts)
    rng = np.random.default_rng(seed)
    test_prompts = set(rng.choice(uniq, size=int(round(test_fraction * len(uniq))), replace=False))
    test = np.array([p in test_prompts for p in prompts])
    return ~test, test
