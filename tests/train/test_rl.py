"""RL against the private reward: RLOO / PPO-clip math, a learning run and the reward wrapper."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from dpprefsyn.artifact import PreferenceModel
from dpprefsyn.templates import get_template
from dpprefsyn.train.reward import PrivateRewardFunction
from dpprefsyn.train.rl import (
    LOG_FILE,
    RLConfig,
    policy_gradient_loss,
    response_logps,
    response_mask,
    rloo_advantages,
    sequence_kl,
    train_rl,
)

PROMPTS = [
    "the quick brown fox",
    "write a poem about",
    "explain why the sky",
    "what is the capital",
]
TARGET_WORD = "the"


@pytest.fixture(scope="module")
def rl_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny GPT-2 on disk, as ``train_rl`` takes it."""
    from tiny_models import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("rl-lm"))


@pytest.fixture(scope="module")
def rl_model(rl_model_dir: Path):
    """The tiny GPT-2 loaded once, dropout off; tests that change it take a copy."""
    from transformers import AutoModelForCausalLM

    from dpprefsyn.train.modeling import disable_dropout

    model = AutoModelForCausalLM.from_pretrained(rl_model_dir)
    disable_dropout(model)
    return model


def target_fraction(prompts: list[str], responses: list[str]) -> list[float]:
    """Share of a response's words that are TARGET_WORD: a reward one token can maximise."""
    return [r.split().count(TARGET_WORD) / max(len(r.split()), 1) for r in responses]


def sampled_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Random 'prompt + response' ids with left padding on two rows, and the response length."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 30, (4, 9), generator=g)
    attention = torch.ones_like(ids)
    attention[:2, :2] = 0
    ids[:2, :2] = 0
    return ids, attention, 4


# --- math -------------------------------------------------------------------------------


def test_rloo_advantage_is_reward_minus_mean_of_the_others():
    rewards = torch.tensor([1.0, 2.0, 3.0, 6.0, 0.0, 0.0, 0.0, 4.0])
    adv = rloo_advantages(rewards, k=4)
    expected = [1 - 11 / 3, 2 - 10 / 3, 3 - 9 / 3, 6 - 6 / 3, -4 / 3, -4 / 3, -4 / 3, 4.0]
    torch.testing.assert_close(adv, torch.tensor(expected))
    torch.testing.assert_close(adv.view(2, 4).sum(dim=1), torch.zeros(2))


def test_rloo_advantage_rejects_bad_groups():
    with pytest.raises(ValueError, match="k >= 2"):
        rloo_advantages(torch.zeros(4), k=1)
    with pytest.raises(ValueError, match="dividing"):
        rloo_advantages(torch.zeros(5), k=2)


def test_response_mask_stops_after_the_first_eos_even_when_pad_is_eos():
    eos = 2
    tokens = torch.tensor([[5, 6, 7], [5, eos, eos], [eos, eos, eos]])
    assert response_mask(tokens, [eos]).tolist() == [[1, 1, 1], [1, 1, 0], [1, 0, 0]]
    assert response_mask(tokens, [9, 7]).tolist()[0] == [1, 1, 1]


def test_kl_is_zero_when_the_policy_is_the_reference(rl_model):
    ids, attention, n = sampled_batch()
    with torch.no_grad():
        logps = response_logps(rl_model, ids, attention, n)
        ref_logps = response_logps(copy.deepcopy(rl_model), ids, attention, n)
    assert torch.all(sequence_kl(logps, ref_logps, torch.ones_like(logps)) == 0)
    assert logps.shape == (4, n) and torch.all(logps < 0)


def test_response_logps_are_those_generate_sampled_from(rl_model, rl_model_dir: Path):
    """The on-policy premise: left padding and early EOS do not shift the scored log-probs."""
    from transformers import AutoTokenizer

    from dpprefsyn.train.rl import _plain_generation_config

    tokenizer = AutoTokenizer.from_pretrained(rl_model_dir, padding_side="left")
    model = copy.deepcopy(rl_model)
    model.generation_config = _plain_generation_config(model.generation_config, tokenizer)
    prompts = ["the quick brown fox jumps over", "a", "write a poem"]
    enc = tokenizer(prompts, padding=True, return_tensors="pt")  # left-pads the short prompts
    ids, attention = (enc[k].repeat_interleave(4, dim=0) for k in ("input_ids", "attention_mask"))
    torch.manual_seed(1)
    out = model.generate(
        input_ids=ids,
        attention_mask=attention,
        do_sample=True,
        temperature=0.7,
        top_k=0,
        top_p=1.0,
        max_new_tokens=12,
        return_dict_in_generate=True,
        output_logits=True,
    )
    tokens = out.sequences[:, ids.shape[1] :]
    mask = response_mask(tokens, [tokenizer.eos_token_id])
    sampled = torch.stack([(lg / 0.7).log_softmax(-1) for lg in out.logits], dim=1)
    sampled = sampled.gather(2, tokens[..., None]).squeeze(-1)
    with torch.no_grad():
        scored = response_logps(
            model,
            out.sequences,
            torch.cat([attention, mask], dim=1),
            tokens.shape[1],
            temperature=0.7,
        )
    assert (attention == 0).any()
    torch.testing.assert_close(scored * mask, sampled * mask, atol=1e-5, rtol=0)


def test_ppo_clip_at_ratio_one_has_the_rloo_gradient(rl_model):
    model = copy.deepcopy(rl_model)
    ids, attention, n = sampled_batch()
    mask = torch.ones(4, n)
    mask[0, -1] = 0
    advantages = rloo_advantages(torch.tensor([0.3, -1.0, 2.0, 0.5]), k=2)
    grads = []
    for cliprange in (None, 0.2):
        model.zero_grad()
        logps = response_logps(model, ids, attention, n)
        loss, clip_fraction = policy_gradient_loss(
            logps, logps.detach(), advantages, mask, cliprange=cliprange
        )
        loss.backward()
        assert clip_fraction.item() == 0
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert grads[0].abs().max() > 0
    torch.testing.assert_close(grads[0], grads[1])


def test_ppo_clip_stops_the_gradient_of_clipped_tokens():
    logps = torch.zeros(2, 2, requires_grad=True)
    old = torch.tensor([[0.0, -1.0], [0.0, 0.0]])  # token (0, 1): ratio e, far above 1.2
    loss, clip_fraction = policy_gradient_loss(
        logps, old, torch.tensor([1.0, -1.0]), torch.ones(2, 2), cliprange=0.2
    )
    loss.backward()
    assert clip_fraction.item() == pytest.approx(0.25)
    assert logps.grad[0, 1] == 0 and logps.grad[0, 0] != 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"loss": "ppo"},
        {"k_samples": 1},
        {"steps": 0},
        {"kl_coef": -0.1},
        {"temperature": 0.0},
        {"loss": "rloo", "ppo_epochs": 2},
    ],
)
def test_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        RLConfig(**kwargs)


def test_config_bf16_follows_the_device():
    assert RLConfig(device="cpu").bf16 is False
    assert RLConfig(device="cpu", bf16=True).bf16 is True


# --- training ---------------------------------------------------------------------------


def read_log(out: Path) -> list[dict]:
    """The per-step records of a run."""
    return [json.loads(line) for line in (out / LOG_FILE).read_text().splitlines()]


def test_rloo_raises_a_synthetic_reward(rl_model_dir: Path, tmp_path: Path):
    config = RLConfig(
        learning_rate=3e-2,
        steps=12,
        max_new_tokens=6,
        kl_coef=0.01,
        seed=0,
        device="cpu",
        output_dir=str(tmp_path / "rl"),
    )
    out = train_rl(rl_model_dir, PROMPTS, target_fraction, config)
    log = read_log(out)
    assert [row["step"] for row in log] == list(range(12))
    first = np.mean([row["reward"] for row in log[:3]])
    last = np.mean([row["reward"] for row in log[-3:]])
    assert last > first + 0.3, (first, last)
    assert log[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # policy == reference before any update
    assert log[-1]["kl"] > 0
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trained = AutoModelForCausalLM.from_pretrained(out)
    assert trained.generation_config.top_k != 0  # the checkpoint keeps its own sampling config
    assert AutoTokenizer.from_pretrained(out).padding_side == "right"  # as it was loaded


def test_ppo_clip_runs_several_epochs_and_logs_clipping(rl_model_dir: Path, tmp_path: Path):
    config = RLConfig(
        loss="ppo-clip",
        ppo_epochs=3,
        learning_rate=5e-2,
        steps=2,
        batch_prompts=2,
        k_samples=3,
        max_new_tokens=4,
        device="cpu",
        output_dir=str(tmp_path / "ppo"),
    )
    log = read_log(train_rl(rl_model_dir, PROMPTS, target_fraction, config))
    assert len(log) == 2
    assert all(0 <= row["clip_fraction"] <= 1 for row in log)
    assert {"reward", "kl", "loss", "time_generate_s"} <= set(log[0])


def test_reward_length_mismatch_is_an_error(rl_model_dir: Path, tmp_path: Path):
    config = RLConfig(steps=1, max_new_tokens=2, device="cpu", output_dir=str(tmp_path / "bad"))
    with pytest.raises(ValueError, match="rewards"):
        train_rl(rl_model_dir, PROMPTS, lambda p, r: [0.0], config)


# --- the private reward -----------------------------------------------------------------


class FakeEmbedder:
    """Deterministic pseudo-embeddings of the rendered pair; records the template it was given."""

    dimension = 12

    def __init__(self) -> None:
        self.templates: list[str] = []

    def encode_pairs(self, prompts, responses, template):
        """Seed a normal vector with a hash of the rendered pair."""
        self.templates.append(template.name)
        rows = []
        for p, r in zip(prompts, responses, strict=True):
            seed = int.from_bytes(hashlib.sha256("".join(template.render(p, r)).encode()).digest())
            rows.append(np.random.default_rng(seed).standard_normal(self.dimension))
        return np.asarray(rows, dtype=np.float32)


def random_preference_model(d: int, embedder: dict) -> PreferenceModel:
    """Three random clusters on a random 4-d subspace of R^d, one of them dropped."""
    rng = np.random.default_rng(0)
    return PreferenceModel(
        projection=np.linalg.qr(rng.standard_normal((d, 4)))[0].T,
        thetas=rng.standard_normal((3, 4)),
        cluster_weights=np.array([0.7, 0.0, 0.3]),  # a dropped cluster: mean != mixture
        embedder=embedder,
    )


@pytest.mark.parametrize("scoring", ["mean", "mixture"])
def test_private_reward_scores_like_the_model(scoring):
    fake = FakeEmbedder()
    pm = random_preference_model(fake.dimension, {"template": "plain"})
    reward = PrivateRewardFunction(pm, scoring=scoring, embedder=fake)
    prompts = ["q"] * 5
    responses = [f"answer {i}" for i in range(5)]
    got = reward(prompts, responses)
    psi = FakeEmbedder().encode_pairs(prompts, responses, get_template("plain"))
    expected = pm.mean_reward(psi) if scoring == "mean" else pm.mixture_reward(psi)
    assert got.dtype == torch.float32 and got.shape == (5,)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)
    assert list(np.argsort(got.numpy())) == list(np.argsort(expected))
    assert fake.templates == ["plain"]


def test_private_reward_rejects_bad_input():
    pm = random_preference_model(FakeEmbedder.dimension, {"template": "plain"})
    with pytest.raises(ValueError, match="scoring"):
        PrivateRewardFunction(pm, scoring="routed")
    with pytest.raises(ValueError, match="2 prompts but 1"):
        PrivateRewardFunction(pm, embedder=FakeEmbedder())(["a", "b"], ["c"])


def test_private_reward_embeds_with_the_models_own_minilm():
    from dpprefsyn.embedding import Embedder

    reference = Embedder(device="cpu", max_seq_length=128, show_progress=False)
    info = {
        "model": reference.model_id,
        "max_seq_length": 128,
        "template": "dialogue",
        "embedding_model": None,
    }
    pm = random_preference_model(reference.dimension, info)
    prompts = ["How do I boil an egg?"] * 3
    responses = ["Boil it for nine minutes.", "Eggs are laid by hens.", "No."]
    got = PrivateRewardFunction(pm, device="cpu")(prompts, responses)
    expected = pm.mean_reward(reference.encode_pairs(prompts, responses, "dialogue"))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-6)

    other = random_preference_model(reference.dimension, {**info, "model": "other@sha256:0"})
    with pytest.raises(ValueError, match="fitted on embeddings"):
        PrivateRewardFunction(other, device="cpu")(prompts[:1], responses[:1])
