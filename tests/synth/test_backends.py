"""Candidate backends: registry, shared rules, vLLM request shape, a real tiny model, pools."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import FrozenInstanceError
from pathlib import Path

import pydantic
import pytest
from tiny_models import build_tiny_causal_lm

from dpprefsyn.errors import DataError
from dpprefsyn.synth import backends
from dpprefsyn.synth.backends import (
    BACKENDS,
    Candidate,
    PoolBackend,
    PoolSource,
    TransformersBackend,
    VLLMBackend,
    make_backend,
    register_backend,
)
from dpprefsyn.synth.backends.base import derive_seed, distinct
from dpprefsyn.synth.prompts import load_prompts

# --- shared rules and the registry --------------------------------------------------------------


def test_candidate_is_frozen_and_distinct_drops_empty_and_repeats():
    a, b = Candidate("x", "m"), Candidate(" x ", "n")
    with pytest.raises(FrozenInstanceError):
        a.text = "y"  # type: ignore[misc]
    assert distinct([a, Candidate("  ", "m"), b, Candidate("y", "m", 0.7)]) == [
        a,
        Candidate("y", "m", 0.7),
    ]


def test_derive_seed_depends_on_content_not_position():
    assert derive_seed(0, "p", 0.7) == derive_seed(0, "p", 0.7)
    assert len({derive_seed(0, "p", 0.7), derive_seed(1, "p", 0.7), derive_seed(0, "q", 0.7)}) == 3
    assert 0 <= derive_seed(123, "p") < 2**31


def test_registry_names_and_duplicates():
    assert list(BACKENDS) == ["vllm", "transformers", "pool"]
    with pytest.raises(ValueError, match="already registered"):
        register_backend(PoolBackend)


def test_make_backend_validates_settings():
    backend = make_backend("vllm", model="m", temperature=0.5)
    assert isinstance(backend, VLLMBackend) and backend.temperature == 0.5
    with pytest.raises(pydantic.ValidationError, match="max_new_tokens"):
        make_backend("vllm", model="m", max_new_tokens=5)  # a transformers setting
    with pytest.raises(pydantic.ValidationError):
        make_backend("transformers", model="m", temperature=0)
    with pytest.raises(pydantic.ValidationError):
        VLLMBackend("m", mixed_temperatures=[])
    with pytest.raises(ValueError, match="unknown backend"):
        make_backend("openai", model="m")
    with pytest.raises(ValueError, match="only applies"):
        make_backend("pool", cpu_fallback="pool", sources=["x.json"])


def test_auto_picks_vllm_only_with_cuda_and_vllm(monkeypatch):
    settings = {"vllm": {"model": "big"}, "transformers": {"model": "small"}}
    monkeypatch.setattr(backends, "vllm_usable", lambda: False)
    assert isinstance(
        make_backend("auto", cpu_fallback="transformers", **settings), TransformersBackend
    )
    with pytest.raises(ValueError, match="no pool= settings"):
        make_backend("auto", **settings)
    with pytest.raises(ValueError, match="cpu_fallback"):
        make_backend("auto", cpu_fallback="vllm", **settings)
    with pytest.raises(ValueError, match="keyed by backend name"):
        make_backend("auto", model="big")
    monkeypatch.setattr(backends, "vllm_usable", lambda: True)
    assert make_backend("auto", **settings).model == "big"


def test_vllm_usable_is_false_without_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert backends.vllm_usable() is False


def test_generate_checks_state_and_arguments(tmp_path):
    backend = PoolBackend([_pool_file(tmp_path)])
    with pytest.raises(RuntimeError, match="load"):
        backend.generate(["p"], n=2, seed=0)
    backend.load()
    for bad in ({"n": 0, "seed": 0}, {"n": 2, "seed": 0.5}, {"n": True, "seed": 0}):
        with pytest.raises(ValueError):
            backend.generate(["p"], **bad)
    with pytest.raises(ValueError, match="sequence of strings"):
        backend.generate("p", n=2, seed=0)
    assert backend.generate([], n=2, seed=0) == []


def test_signatures_leave_out_runtime_settings():
    vllm = VLLMBackend("m", mixed_temperatures=[0.3, 1.2], stop=["\n\n"])
    assert vllm.signature() == {
        "backend": "vllm",
        "model": "m",
        "top_p": 1.0,
        "chat_template": True,
        "max_tokens": 512,
        "stop": ["\n\n"],
        "dtype": "auto",
        "temperatures": [0.3, 1.2],
    }
    assert (
        vllm.signature()
        == VLLMBackend(
            "m", mixed_temperatures=[0.3, 1.2], stop=["\n\n"], gpu_memory_utilization=0.5
        ).signature()
    )
    hf = TransformersBackend("m", batch_size=2, device="cpu")
    assert hf.signature() == TransformersBackend("m").signature()
    assert hf.signature()["temperatures"] == [0.9] and "batch_size" not in hf.signature()


def test_temperature_plan_splits_n():
    backend = VLLMBackend("m", mixed_temperatures=[0.2, 0.7, 1.2])
    assert backend.temperature_plan(5) == [(0.2, 2), (0.7, 2), (1.2, 1)]
    assert backend.temperature_plan(2) == [(0.2, 1), (0.7, 1)]
    assert VLLMBackend("m").temperature_plan(5) == [(0.9, 5)]


# --- vLLM, against a stand-in of its documented API ---------------------------------------------


class FakeSamplingParams:
    """Records its keyword arguments, like ``vllm.SamplingParams(n=..., temperature=...)``."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


class FakeLLM:
    """``vllm.LLM``: ``generate(prompts, params)``/``chat(messages, params)`` -> RequestOutputs.

    Each ``RequestOutput.outputs[i].text`` is a function of the request's seed and ``i``, so
    determinism and seeding are observable.
    """

    instances: list[FakeLLM] = []

    def __init__(self, **kwargs):
        self.init = kwargs
        self.calls: list[tuple[str, list, list]] = []
        FakeLLM.instances.append(self)

    def _run(self, method, inputs, params, use_tqdm):
        assert len(inputs) == len(params) and use_tqdm is False
        self.calls.append((method, list(inputs), list(params)))
        return [
            types.SimpleNamespace(
                outputs=[
                    types.SimpleNamespace(text=f"s{p.kwargs['seed']}-{i}", finish_reason="stop")
                    for i in range(p.kwargs["n"])
                ]
            )
            for p in params
        ]

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True):
        return self._run("generate", prompts, sampling_params, use_tqdm)

    def chat(self, messages, sampling_params=None, use_tqdm=True):
        return self._run("chat", messages, sampling_params, use_tqdm)


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = FakeLLM, FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    FakeLLM.instances.clear()
    return module


def test_vllm_one_request_per_prompt_with_n_seed_and_stop(fake_vllm):
    backend = VLLMBackend("org/model", temperature=0.8, max_tokens=64, stop=["###"])
    assert FakeLLM.instances == []  # nothing heavy before load()
    backend.load()
    (llm,) = FakeLLM.instances
    assert llm.init == {"model": "org/model", "dtype": "auto", "gpu_memory_utilization": 0.9}
    out = backend.generate(["a?", "b?"], n=5, seed=3)
    ((method, inputs, params),) = llm.calls
    assert method == "chat"
    assert inputs == [[{"role": "user", "content": "a?"}], [{"role": "user", "content": "b?"}]]
    seeds = [derive_seed(3, "a?", 0.8), derive_seed(3, "b?", 0.8)]
    assert [p.kwargs for p in params] == [
        {"n": 5, "temperature": 0.8, "top_p": 1.0, "max_tokens": 64, "stop": ["###"], "seed": s}
        for s in seeds
    ]
    assert [[c.text for c in cands] for cands in out] == [
        [f"s{s}-{i}" for i in range(5)] for s in seeds
    ]
    assert {(c.generator, c.temperature) for cands in out for c in cands} == {("org/model", 0.8)}


def test_vllm_raw_prompts_mixed_temperatures_and_position_independence(fake_vllm):
    backend = VLLMBackend("m", chat_template=False, mixed_temperatures=[0.3, 1.1]).load()
    out = backend.generate(["a?", "b?"], n=5, seed=0)
    ((method, inputs, params),) = FakeLLM.instances[0].calls
    assert (method, inputs) == ("generate", ["a?", "a?", "b?", "b?"])
    assert [(p.kwargs["n"], p.kwargs["temperature"]) for p in params] == [(3, 0.3), (2, 1.1)] * 2
    assert [c.temperature for c in out[0]] == [0.3] * 3 + [1.1] * 2
    assert backend.generate(["b?"], n=5, seed=0) == out[1:]  # a resumed shard reproduces


def test_vllm_missing_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(ImportError, match=r"dpprefsyn\[gpu\]"):
        VLLMBackend("m").load()


# --- transformers, on a tiny model built offline ------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm"))


def test_transformers_backend_samples_n_candidates(tiny_lm):
    backend = TransformersBackend(str(tiny_lm), max_new_tokens=6, batch_size=2).load()
    prompts = ["write a poem about the sea", "why is the sky blue ?", "what is paris ?"]
    out = backend.generate(prompts, n=3, seed=0)
    assert [len(c) for c in out] == [3, 3, 3]
    assert all(isinstance(c.text, str) and c.text.strip() for cands in out for c in cands)
    assert {(c.generator, c.temperature) for cands in out for c in cands} == {(str(tiny_lm), 0.9)}
    assert backend.generate(prompts, n=3, seed=0) == out
    assert backend.generate(prompts, n=3, seed=1) != out


def test_transformers_backend_raw_text_and_mixed_temperatures(tiny_lm):
    backend = TransformersBackend(
        str(tiny_lm), chat_template=False, max_new_tokens=4, mixed_temperatures=[0.5, 1.5]
    ).load()
    out = backend.generate(["the quick brown fox", "a good answer"], n=4, seed=0)
    assert all(1 <= len(c) <= 4 for c in out)
    assert {c.temperature for cands in out for c in cands} <= {0.5, 1.5}


def test_transformers_backend_needs_a_chat_template_when_asked(tmp_path):
    path = build_tiny_causal_lm(tmp_path, chat_template=False)
    with pytest.raises(ValueError, match="chat_template=False"):
        TransformersBackend(str(path)).load()


# --- pools --------------------------------------------------------------------------------------


def _pool_file(tmp_path: Path) -> Path:
    rows = [
        {"prompt": "p", "response": "r1", "generator": "g1"},
        {"prompt": "p ", "response": "r2", "generator": "g2"},
        {"prompt": "p", "response": "r1", "generator": "g3"},
        {"prompt": "p", "response": " ", "generator": "g4"},
        {"prompt": "q", "response": None, "generator": "g1"},
    ]
    path = tmp_path / "pool.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_plain_pool_drops_empty_and_duplicates_and_leaves_unknown_prompts_empty(tmp_path):
    backend = PoolBackend([_pool_file(tmp_path)]).load()
    assert backend.dropped_ == {"duplicate": 1, "empty": 2}
    out = backend.generate(["p", "q", "never seen"], n=5, seed=0)
    assert out == [[Candidate("r1", "g1"), Candidate("r2", "g2")], [], []]


def test_pool_joins_ids_to_questions_and_needs_them(tmp_path):
    questions = tmp_path / "question.jsonl"
    questions.write_text(json.dumps({"question_id": 1, "turns": ["Q one?", "follow-up"]}) + "\n")
    answers = tmp_path / "model-x.jsonl"
    answer = {"question_id": 1, "model_id": "x", "choices": [{"index": 0, "turns": ["A.", "B."]}]}
    answers.write_text(json.dumps(answer) + "\n")
    with pytest.raises(DataError, match="questions="):
        PoolBackend([answers]).load()
    backend = PoolBackend([{"path": answers, "questions": questions}]).load()
    assert backend.generate(["Q one?"], n=2, seed=0) == [[Candidate("A.", "x")]]
    answers.write_text(json.dumps({**answer, "question_id": 2}) + "\n")
    with pytest.raises(DataError, match="id '2' is not in"):
        PoolBackend([{"path": answers, "questions": questions}]).load()


def test_pool_source_validation(tmp_path):
    assert PoolSource.model_validate("a.json") == PoolSource(path=Path("a.json"))
    with pytest.raises(pydantic.ValidationError):
        PoolSource(path="a.json", fmt="jsonl")
    with pytest.raises(FileNotFoundError):
        PoolBackend(["missing.json"]).load()
    (tmp_path / "odd.jsonl").write_text(json.dumps({"text": "x"}) + "\n")
    with pytest.raises(DataError, match="unknown candidate format"):
        PoolBackend([tmp_path / "odd.jsonl"]).load()


ALPACA_MODELS = [
    "gpt4",
    "claude",
    "alpaca-7b",
    "vicuna-7b",
    "gemma-2b-it",
    "phi-2",
    "falcon-7b-instruct",
]


@pytest.mark.realdata
def test_alpaca_eval_pool_gives_n_per_prompt_deterministically(shared_data):
    root = shared_data / "alpaca-eval/results"
    backend = PoolBackend([root / m / "model_outputs.json" for m in ALPACA_MODELS]).load()
    prompts = load_prompts(root / "gpt4/model_outputs.json").prompts
    out = backend.generate(prompts, n=5, seed=0)
    pooled = backend.generate(prompts, n=len(ALPACA_MODELS), seed=0)  # all distinct answers
    assert [len(c) for c in out] == [min(5, len(c)) for c in pooled]
    assert sum(len(c) == 5 for c in out) > 790  # a few prompts have repeated or empty answers
    assert all(set(small) <= set(full) for small, full in zip(out, pooled, strict=True))
    assert {c.generator for cands in out for c in cands} == set(ALPACA_MODELS)
    assert backend.generate(prompts, n=5, seed=0) == out
    assert backend.generate(prompts, n=5, seed=1) != out
    assert backend.generate(prompts[100:110], n=5, seed=0) == out[100:110]


@pytest.mark.realdata
def test_mt_bench_answers_joined_to_questions(shared_data):
    questions = shared_data / "mt-bench/question.jsonl"
    files = sorted((shared_data / "mt-bench/model_answer").glob("*.jsonl"))
    assert len(files) >= 10
    backend = PoolBackend([{"path": f, "questions": questions} for f in files]).load()
    prompts = load_prompts(questions).prompts
    out = backend.generate(prompts, n=5, seed=0)
    assert [len(c) for c in out] == [5] * 80
    assert backend.generate(prompts, n=5, seed=0) == out
    gpt4 = json.loads(
        (shared_data / "mt-bench/model_answer/gpt-4.jsonl").read_text().splitlines()[0]
    )
    pooled = backend.generate(prompts[:1], n=100, seed=0)[0]
    assert gpt4["choices"][0]["turns"][0] in {c.text for c in pooled}


@pytest.mark.realdata
def test_arena_hard_and_xsum_pools(shared_data):
    arena = shared_data / "arena-hard/arena-hard-v0.1"
    backend = PoolBackend(sorted((arena / "model_answer").glob("*.jsonl"))).load()
    out = backend.generate(load_prompts(arena / "question.jsonl").prompts, n=5, seed=0)
    assert len(out) == 500 and all(2 <= len(c) <= 3 for c in out)
    assert {c.generator for c in out[0]} <= {"gpt-3.5-turbo-0125", "gpt-4-0314", "gpt-4-0613"}

    archive = shared_data / "xsum/xsum-human-evaluation-data.tar.gz"
    backend = PoolBackend([archive]).load()
    out = backend.generate(load_prompts(archive).prompts, n=4, seed=0)
    assert [len(c) for c in out] == [4] * 50
