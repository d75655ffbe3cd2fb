"""Throughput of the Embedder against a plain ``SentenceTransformer.encode`` call.

Both embed the same HH-RLHF (harmless-base test) pairs, cut to the window by the Embedder's
tail-preserving rule, so the vectors must agree (min cosine is reported). The plain call uses
its default batch size (32); the Embedder's time includes rendering, truncation and hashing,
with its cache off. Work is split into chunks and the two alternate within each chunk, so that
load from other processes on a shared machine hits both alike. Last, the same pairs are read
back from a filled cache: the cost of a rerun.

Usage::

    HF_HUB_OFFLINE=1 python benchmarks/embedding_throughput.py --n 400 --json out.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

DEFAULT_DATA = (
    Path(__file__).resolve().parents[2] / "shared/data/hh-rlhf/harmless-base/test.jsonl.gz"
)
_ASSISTANT = "\n\nAssistant:"


def load_pairs(path: Path, n: int) -> tuple[list[str], list[str]]:
    """Read the first ``n`` (prompt, chosen response) pairs: dialogue up to the last turn, reply."""
    prompts, responses = [], []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            dialogue = json.loads(line)["chosen"]
            cut = dialogue.rfind(_ASSISTANT) + len(_ASSISTANT)
            prompts.append(dialogue[:cut])
            responses.append(dialogue[cut:].lstrip())
            if len(prompts) == n:
                break
    return prompts, responses


def make_parser() -> argparse.ArgumentParser:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=400, help="number of pairs (default 400)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="HH-RLHF .jsonl.gz")
    parser.add_argument("--model", default=None, help="model (default: the Embedder's)")
    parser.add_argument("--device", default=None, help="torch device (default: auto)")
    parser.add_argument("--batch-size", type=int, default=64, help="the Embedder's (default 64)")
    parser.add_argument("--chunks", type=int, default=4, help="alternation chunks (default 4)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark, print a markdown table and return (and optionally write) the results."""
    args = make_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    from dpprefsyn.embedding import Embedder, default_model, text_key

    prompts, responses = load_pairs(args.data, args.n)
    embedder = Embedder(
        args.model, device=args.device, batch_size=args.batch_size, show_progress=False
    ).load()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    plain = SentenceTransformer(args.model or default_model(device), device=device)
    plain.max_seq_length = embedder._window
    texts = embedder.truncate_pairs(prompts, responses)
    n_tokens = [len(ids) for ids in plain.tokenizer(texts)["input_ids"]]

    def run_plain(lo: int, hi: int) -> np.ndarray:
        return plain.encode(texts[lo:hi], convert_to_numpy=True)  # its default batch size

    def run_ours(lo: int, hi: int) -> np.ndarray:
        return embedder.encode_pairs(prompts[lo:hi], responses[lo:hi])

    run_plain(0, 8), run_ours(0, 8)  # warm-up: first-call allocations, lazy kernels
    seconds = {"plain": 0.0, "embedder": 0.0}
    vectors: dict[str, list[np.ndarray]] = {"plain": [], "embedder": []}
    bounds = np.linspace(0, len(texts), args.chunks + 1).astype(int)
    for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        runs = [("plain", run_plain), ("embedder", run_ours)]
        for name, run in runs if k % 2 == 0 else runs[::-1]:
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            start = time.perf_counter()
            vectors[name].append(run(lo, hi))
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            seconds[name] += time.perf_counter() - start
    a, b = (np.concatenate(vectors[name]) for name in ("plain", "embedder"))
    cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))

    # A rerun: the same pairs against a cache that already holds them (filled directly).
    with tempfile.TemporaryDirectory() as cache_dir:
        rerun = Embedder(args.model, device=args.device, cache_dir=cache_dir, show_progress=False)
        rerun.load()._cache.put([text_key(text) for text in texts], b)
        start = time.perf_counter()
        rerun.encode_pairs(prompts, responses)
        seconds["cached rerun"] = time.perf_counter() - start

    result = {
        "model_id": embedder.model_id,
        "device": device,
        "torch_threads": torch.get_num_threads(),
        "n_texts": len(texts),
        "mean_tokens": float(np.mean(n_tokens)),
        "plain_batch_size": 32,
        "embedder_batch_size": args.batch_size,
        "plain_texts_per_s": len(texts) / seconds["plain"],
        "embedder_texts_per_s": len(texts) / seconds["embedder"],
        "speedup": seconds["plain"] / seconds["embedder"],
        "min_cosine": float(cosine.min()),
        "cached_rerun_texts_per_s": len(texts) / seconds["cached rerun"],
    }
    print(
        "| model | device | n | mean tokens | plain texts/s | Embedder texts/s | ratio | min cos"
        " | cached rerun texts/s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {result['model_id'].split('|')[0]} | {device} ({result['torch_threads']} threads)"
        f" | {len(texts)} | {result['mean_tokens']:.0f} | {result['plain_texts_per_s']:.1f}"
        f" | {result['embedder_texts_per_s']:.1f} | {result['speedup']:.2f}x"
        f" | {result['min_cosine']:.6f} | {result['cached_rerun_texts_per_s']:.0f} |"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
