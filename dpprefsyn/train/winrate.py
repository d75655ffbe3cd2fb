"""Win rate of a policy against a baseline on public prompts, judged by a local model.

Both models answer every prompt once (or the baseline's answers are read from a file, such as
AlpacaEval's reference outputs); a :class:`~dpprefsyn.train.judge.LocalJudge` then compares each
pair twice, the policy's answer shown first and then second, and the two verdicts are averaged
so that the judge's preference for a position cancels. A prompt's score is the order-averaged
probability that the policy's answer is better; the win rate is their mean over prompts.

>>> from dpprefsyn.train.winrate import win_rate  # doctest: +SKIP
>>> judge = "Qwen/Qwen2.5-7B-Instruct"
>>> report = win_rate(prompts, "dpo-model", "sft-model", judge, "wr")  # doctest: +SKIP
>>> report.summary["win_rate"], report.summary["ci"]  # doctest: +SKIP
(0.61, [0.57, 0.65])

Everything here reads public prompts and model outputs only.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpprefsyn.train.generation import generate_responses, resolve_backend
from dpprefsyn.train.judge import (
    JUDGE_TEMPLATE,
    LocalJudge,
    PairwiseJudge,
    check_template,
    label_ids,
)
from dpprefsyn.train.pairwise_stats import summarise

if TYPE_CHECKING:
    from dpprefsyn.synth.prompts import PromptSet

RECORDS_FILE = "records.jsonl"
SUMMARY_FILE = "summary.json"
BACKENDS = ("auto", "transformers", "vllm")
CI_METHODS = ("bootstrap", "normal")
DTYPES = (None, "auto", "bfloat16", "float16", "float32")
RESPONSE_FILE_SUFFIXES = (".json", ".jsonl", ".gz", ".parquet", ".csv")

Source = str | os.PathLike[str] | Sequence[str]
"""A model (hub name or folder), a file of answers, or the answers themselves, one per prompt."""


@dataclass
class WinRateConfig:
    r"""Configuration of :func:`win_rate`.

    Parameters
    ----------
    max_new_tokens : int, default=512
    temperature : float, default=0.0
        0 decodes greedily; above 0 samples (with ``top_p``, seeded by ``seed``).
    top_p : float, default=1.0
    seed : int, default=0
        Sampling and bootstrap seed.
    batch_size : int, default=8
        Prompts per ``generate`` call (transformers).
    chat_template : bool or None, default=None
        Send prompts as a user turn through the tokenizer's chat template; None: when it has one.
    backend : {"auto", "transformers", "vllm"}, default="auto"
        ``auto`` generates with vLLM when it is installed and CUDA is present.
    vllm_gpu_memory_utilization : float, default=0.5
        Leaves room for the judge, which loads after generation.
    judge_template : str, default=JUDGE_TEMPLATE
        With ``{instruction}``, ``{output_a}`` and ``{output_b}`` once each.
    labels : list of str, default=["A", "B"]
        The answers the template asks for; single tokens of the judge's vocabulary.
    judge_batch_size : int, default=4
    judge_chat_template : bool or None, default=None
    dtype : str or None, default=None
        Weights' dtype; None: bfloat16 with CUDA, float32 without.
    device_map : str or None, default=None
        None: ``"auto"`` with CUDA, the CPU without.
    ci : {"bootstrap", "normal"}, default="bootstrap"
        Percentile bootstrap over prompts, or the normal approximation.
    confidence : float, default=0.95
    n_bootstrap : int, default=2000
    progress : bool, default=True
    """

    # Generation
    max_new_tokens: int = field(default=512, metadata={"help": "Longest answer, in tokens."})
    temperature: float = field(
        default=0.0, metadata={"help": "0 decodes greedily; above 0 samples."}
    )
    top_p: float = field(default=1.0, metadata={"help": "Nucleus mass when sampling."})
    seed: int = field(default=0, metadata={"help": "Sampling and bootstrap seed."})
    batch_size: int = field(default=8, metadata={"help": "Prompts per generate call."})
    chat_template: bool | None = field(
        default=None, metadata={"help": "Prompts as chat user turns; None: if the model has one."}
    )
    backend: str = field(
        default="auto",
        metadata={"help": "auto (vLLM if usable), transformers or vllm.", "choices": BACKENDS},
    )
    vllm_gpu_memory_utilization: float = field(
        default=0.5, metadata={"help": "GPU share vLLM may take; the judge loads after it."}
    )

    # Judge
    judge_template: str = field(
        default=JUDGE_TEMPLATE,
        metadata={"help": "Judge prompt with {instruction}, {output_a}, {output_b} once each."},
    )
    labels: list[str] = field(
        default_factory=lambda: ["A", "B"],
        metadata={"help": "Labels of the first and second answer; single judge tokens."},
    )
    judge_batch_size: int = field(default=4, metadata={"help": "Comparisons per forward pass."})
    judge_chat_template: bool | None = field(
        default=None, metadata={"help": "Judge prompt as a chat user turn; None: if it has one."}
    )

    # Models
    dtype: str | None = field(
        default=None, metadata={"help": "Weights' dtype; None: bfloat16 on CUDA, else float32."}
    )
    device_map: str | None = field(
        default=None, metadata={"help": "None: 'auto' on CUDA, else the CPU."}
    )

    # Statistics
    ci: str = field(
        default="bootstrap",
        metadata={"help": "bootstrap (percentile, over prompts) or normal.", "choices": CI_METHODS},
    )
    confidence: float = field(default=0.95, metadata={"help": "Confidence level of the CI."})
    n_bootstrap: int = field(default=2000, metadata={"help": "Bootstrap resamples."})
    progress: bool = field(default=True, metadata={"help": "Show progress bars."})

    def __post_init__(self) -> None:
        """Check ranges and choices, and the template's fields, before any model loads."""
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.ci not in CI_METHODS:
            raise ValueError(f"ci must be one of {CI_METHODS}, got {self.ci!r}")
        for name in ("max_new_tokens", "batch_size", "judge_batch_size", "n_bootstrap"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"need temperature >= 0 and 0 < top_p <= 1, got {self.temperature}")
        if not 0 < self.confidence < 1 or not 0 < self.vllm_gpu_memory_utilization <= 1:
            raise ValueError(
                "confidence must be in (0, 1) and vllm_gpu_memory_utilization in (0, 1]"
            )
        self.labels = list(self.labels)
        if len(self.labels) != 2:
            raise ValueError(f"labels must be two strings, got {self.labels!r}")
        check_template(self.judge_template)


@dataclass
class WinRateReport:
    """What :func:`win_rate` measured: the ``summary`` and one record per prompt."""

    summary: dict[str, Any]
    records: list[dict[str, Any]]


def win_rate(
    prompts: PromptSet | Sequence[str] | str | os.PathLike[str],
    policy: Source,
    baseline: Source,
    judge: str | os.PathLike[str] | PairwiseJudge,
    out_dir: str | os.PathLike[str] | None = None,
    *,
    config: WinRateConfig | None = None,
) -> WinRateReport:
    """Judge the policy's answers against the baseline's, in both orders, and summarise.

    Parameters
    ----------
    prompts : PromptSet, sequence of str, str or os.PathLike
        Public prompts, or a file :func:`~dpprefsyn.synth.prompts.load_prompts` reads.
    policy, baseline : str, os.PathLike or sequence of str
        A causal LM (hub name or folder) that answers each prompt once; a file of answers
        (AlpacaEval ``model_outputs.json`` or reference outputs, MT-Bench/Arena-Hard answers,
        JSONL with ``prompt`` and ``response``), matched to the prompts by text; or the answers
        themselves, in prompt order. Models load one at a time and are freed after generating.
    judge : str, os.PathLike or PairwiseJudge
        A causal LM loaded as a :class:`~dpprefsyn.train.judge.LocalJudge` with the config's
        template and labels, or any object with ``prob_first_better``.
    out_dir : str, os.PathLike or None, default=None
        Where ``records.jsonl`` (prompt, both answers, both verdicts) and ``summary.json`` go.
    config : WinRateConfig or None, default=None

    Returns
    -------
    WinRateReport
        ``summary`` (:func:`~dpprefsyn.train.pairwise_stats.summarise`, plus the run's
        settings and timings) and the per-prompt ``records``.

    Raises
    ------
    ValueError
        No prompts, answers missing for some prompts, or a judge probability outside [0, 1].
    FileNotFoundError
        An answers file that does not exist.
    """
    cfg = config or WinRateConfig()
    prompt_ids, texts = _prompt_table(prompts)
    sources = {"policy": policy, "baseline": baseline}
    # Files and the judge's labels first: a bad input fails before any model runs.
    answers = {
        role: _given_answers(src, prompt_ids, texts, cfg, role) for role, src in sources.items()
    }
    if isinstance(judge, str | os.PathLike):
        _check_judge_labels(judge, cfg.labels)
    timings: dict[str, float] = {}
    for role, source in sources.items():
        if answers[role] is None:
            start = time.perf_counter()
            answers[role] = generate_responses(source, texts, cfg, desc=role)
            timings[f"{role}_s"] = time.perf_counter() - start

    start = time.perf_counter()
    pol, base = answers["policy"], answers["baseline"]
    judged = [i for i in range(len(texts)) if pol[i].strip() != base[i].strip()]
    p_a, mass = _judge_both_orders(judge, [texts[i] for i in judged], pol, base, judged, cfg)
    timings["judge_s"] = time.perf_counter() - start

    records = []
    for i, prompt in enumerate(texts):
        row = {"prompt_id": prompt_ids[i], "prompt": prompt, "policy": pol[i], "baseline": base[i]}
        if i in p_a:
            p_first, p_second = p_a[i]
            win = (p_first + 1 - p_second) / 2
            outcome = _outcome(p_first, p_second)
        else:  # identical answers: a tie by definition, nothing to judge
            p_first = p_second = None
            win, outcome = 0.5, "tie"
        row |= {
            "p_a_policy_first": p_first,
            "p_a_policy_second": p_second,
            "label_mass": mass.get(i),
            "win": win,
            "outcome": outcome,
            "identical": i not in p_a,
        }
        records.append(row)
    summary = summarise(
        records,
        method=cfg.ci,
        confidence=cfg.confidence,
        n_bootstrap=cfg.n_bootstrap,
        seed=cfg.seed,
    ) | {
        "policy": _describe(policy),
        "baseline": _describe(baseline),
        "judge": _describe(judge),
        "backend": resolve_backend(cfg.backend),
        "timings_s": timings,
        "config": asdict(cfg),
    }
    if out_dir is not None:
        _write(Path(out_dir), records, summary)
    return WinRateReport(summary=summary, records=records)


def _check_judge_labels(judge: str | os.PathLike[str], labels: list[str]) -> None:
    from transformers import AutoTokenizer

    label_ids(AutoTokenizer.from_pretrained(judge), labels)


def _prompt_table(prompts: Any) -> tuple[list[str], list[str]]:
    from dpprefsyn.synth.prompts import PromptSet, load_prompts

    if isinstance(prompts, str | os.PathLike):
        prompts = load_prompts(prompts)
    if isinstance(prompts, PromptSet):
        return prompts.table["prompt_id"].to_list(), prompts.prompts
    texts = list(prompts)
    if not texts:
        raise ValueError("no prompts to answer")
    return [str(i) for i in range(len(texts))], texts


def _given_answers(
    source: Source, prompt_ids: list[str], prompts: list[str], cfg: WinRateConfig, role: str
) -> list[str] | None:
    """The answers of ``source`` when it is a list or a file of answers; None for a model."""
    if not isinstance(source, str | os.PathLike):
        answers = list(source)
        if len(answers) != len(prompts):
            raise ValueError(f"{len(answers)} {role} answers for {len(prompts)} prompts")
        return answers
    path = Path(source)
    if not (path.is_file() or path.name.lower().endswith(RESPONSE_FILE_SUFFIXES)):
        return None
    if not path.is_file():
        raise FileNotFoundError(f"no such {role} answers file: {str(path)!r}")
    from dpprefsyn.synth.backends import PoolBackend

    found = PoolBackend([path]).load().generate(prompts, n=1, seed=cfg.seed)
    missing = [i for i, candidates in enumerate(found) if not candidates]
    if missing:
        raise ValueError(
            f"{len(missing)} of {len(prompts)} prompts have no {role} answer in {path} (first: "
            f"prompt {prompt_ids[missing[0]]!r}); answers are matched to prompts by their text"
        )
    return [candidates[0].text.strip() for candidates in found]


def _judge_both_orders(
    judge: Any,
    instructions: list[str],
    policy: list[str],
    baseline: list[str],
    index: list[int],
    cfg: WinRateConfig,
) -> tuple[dict[int, tuple[float, float]], dict[int, float]]:
    """P(label A) with the policy's answer first and then second, by prompt index."""
    if not index:
        return {}, {}
    if isinstance(judge, str | os.PathLike):
        judge = LocalJudge.from_pretrained(
            judge,
            dtype=cfg.dtype,
            device_map=cfg.device_map,
            template=cfg.judge_template,
            labels=cfg.labels,
            batch_size=cfg.judge_batch_size,
            chat_template=cfg.judge_chat_template,
            progress=cfg.progress,
        )
    elif not isinstance(judge, PairwiseJudge):
        raise TypeError(f"judge must be a model name or path or a PairwiseJudge, got {judge!r}")
    pol, base = [policy[i] for i in index], [baseline[i] for i in index]
    both = (instructions * 2, pol + base, base + pol)
    if isinstance(judge, LocalJudge):
        p, mass = judge.scores(*both)
    else:
        p, mass = np.asarray(judge.prob_first_better(*both), dtype=np.float64), None
    n = len(index)
    if p.shape != (2 * n,) or not np.all((p >= 0) & (p <= 1)):
        raise ValueError(f"the judge must give {2 * n} probabilities in [0, 1], got {p!r}")
    verdicts = {i: (float(p[k]), float(p[n + k])) for k, i in enumerate(index)}
    masses = (
        {} if mass is None else {i: float(mass[k] + mass[n + k]) / 2 for k, i in enumerate(index)}
    )
    return verdicts, masses


def _outcome(p_first: float, p_second: float) -> str:
    """Win or loss where both orders pick the same answer, else a tie."""
    if p_first > 0.5 and p_second < 0.5:
        return "win"
    if p_first < 0.5 and p_second > 0.5:
        return "loss"
    return "tie"


def _describe(source: Any) -> str:
    if isinstance(source, str | os.PathLike):
        return os.fspath(source)
    return "<answers>" if isinstance(source, Sequence) else type(source).__name__


def _write(out_dir: Path, records: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / RECORDS_FILE).open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
