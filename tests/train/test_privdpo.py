"""Label-private DPO: the PrivDPO weight (mean 1, e^eps ratio, unbiased gradient) and baselines."""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest
import torch

from dpprefsyn.train.data import PreferenceCollator
from dpprefsyn.train.forward import pair_logps
from dpprefsyn.train.losses import dpo_logits, dpo_loss
from dpprefsyn.train.privdpo import (
    duchi_bound,
    duchi_mechanism,
    keep_probability,
    label_epsilon,
    piecewise_bound,
    piecewise_mechanism,
    private_dpo_loss,
    privdpo_keep,
    privdpo_weight_distribution,
    privdpo_weights,
    randomized_response_flips,
    released_dpo_loss,
)

EPSILONS = (0.5, 1.0, 3.0)
PSIS = torch.tensor([0.02, 0.3, 0.5, 0.9], dtype=torch.float64)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_formula_as_written_is_the_derived_one():
    """1 + (1/psi)(1 - (e^eps - 2)/(e^eps - 1)) = 1 + (1/psi)/(e^eps - 1), and so on."""
    for eps in EPSILONS:
        e = math.exp(eps)
        values, probs = privdpo_weight_distribution(PSIS, eps)
        torch.testing.assert_close(values[:, 0], 1 + (1 / PSIS) * (1 - (e - 2) / (e - 1)))
        torch.testing.assert_close(values[:, 1], 1 - (1 / PSIS) * (1 + 1 / (e - 1)))
        assert probs[0].item() == pytest.approx(e / (e + 1))


@pytest.mark.parametrize("eps", EPSILONS)
def test_weight_has_mean_one_exactly_and_empirically(eps):
    values, probs = privdpo_weight_distribution(PSIS, eps)
    torch.testing.assert_close(values @ probs, torch.ones_like(PSIS))
    n = 200_000
    draws = privdpo_weights(PSIS.expand(n, -1), eps, gen(1))
    se = draws.std(dim=0) / math.sqrt(n)
    assert torch.all((draws.mean(dim=0) - 1).abs() < 5 * se)


def released_coefficients(psi_a: float, eps: float) -> tuple[dict, dict]:
    """Law of the released gradient coefficient on ``v_ab`` under both labels of a pair.

    ``psi_a`` is the intensity when ``a`` is preferred. Neighbour: ``b`` preferred, so
    ``psi -> 1 - psi_a`` and the direction flips sign: the coefficient is ``-w psi`` under the
    first label and ``+w' (1 - psi_a)`` under the second.
    """
    psi = torch.tensor([psi_a, 1 - psi_a], dtype=torch.float64)
    values, probs = privdpo_weight_distribution(psi, eps)
    probs = probs.tolist()
    law_a = {round(-w * psi_a, 9): p for w, p in zip(values[0].tolist(), probs, strict=True)}
    law_b = {round(w * (1 - psi_a), 9): p for w, p in zip(values[1].tolist(), probs, strict=True)}
    return law_a, law_b


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("psi_a", [0.02, 0.3, 0.5, 0.9])
def test_neighbouring_labels_give_outputs_within_e_eps(eps, psi_a):
    law_a, law_b = released_coefficients(psi_a, eps)
    assert law_a.keys() == law_b.keys()  # same two output values
    for value, p in law_a.items():
        ratio = p / law_b[value]
        assert max(ratio, 1 / ratio) == pytest.approx(math.exp(eps))

    # Empirical: frequencies of the released coefficient under each label.
    n = 100_000
    w_a = privdpo_weights(torch.full((n,), psi_a, dtype=torch.float64), eps, gen(2))
    w_b = privdpo_weights(torch.full((n,), 1 - psi_a, dtype=torch.float64), eps, gen(3))
    out_a = np.round((-w_a * psi_a).numpy(), 9)
    out_b = np.round((w_b * (1 - psi_a)).numpy(), 9)
    assert set(out_a) == set(out_b) == set(law_a)
    for value in law_a:
        freq_a, freq_b = (out_a == value).mean(), (out_b == value).mean()
        assert max(freq_a / freq_b, freq_b / freq_a) == pytest.approx(math.exp(eps), rel=0.08)


def test_released_loss_of_the_true_intensity_is_dpo():
    h = torch.tensor([-30.0, -1.0, 0.0, 2.5, 800.0], requires_grad=True)
    ours = released_dpo_loss(h, 0.1, torch.sigmoid(-0.1 * h.detach().double()))
    ref = dpo_loss(h, torch.zeros(5), torch.zeros(5), torch.zeros(5), 0.1)
    torch.testing.assert_close(ours, ref)
    (g_ours,) = torch.autograd.grad(ours.sum(), h)
    (g_ref,) = torch.autograd.grad(ref.sum(), h)
    torch.testing.assert_close(g_ours, g_ref)
    plain = private_dpo_loss(h, beta=0.1, loss="dpo", epsilon=None, generator=gen())
    assert torch.equal(plain.loss, ref)


def test_private_loss_is_weight_times_dpo_loss_and_finite_when_psi_underflows():
    h = torch.tensor([-5.0, 0.5, 3.0, 1e4], dtype=torch.float64, requires_grad=True)
    out = private_dpo_loss(h, beta=0.1, loss="privdpo", epsilon=1.0, generator=gen(4))
    psi = torch.sigmoid(-0.1 * h.detach())
    w = privdpo_weights(psi, 1.0, gen(4))  # same coins
    finite = slice(0, 3)
    torch.testing.assert_close(out.loss[finite], (w * dpo_loss(h, 0, 0, 0, 0.1))[finite])
    (grad,) = torch.autograd.grad(out.loss.sum(), h)
    # dL/dh = -beta psi, so w dL/dh = -beta (psi + c): bounded even where psi == 0.
    torch.testing.assert_close(grad[finite], (-0.1 * w * psi)[finite])
    assert torch.isfinite(out.loss).all() and torch.isfinite(grad).all()


def coin_seeds(eps: float) -> tuple[int, int]:
    """A seed whose first coin keeps the label, and one whose first coin flips it."""
    keeps = {bool(privdpo_keep(torch.Size([1]), eps, gen(s))[0]): s for s in range(50)}
    return keeps[True], keeps[False]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("loss", ["privdpo", "rr-dpo"])
def test_released_gradient_and_logged_loss_coincide_for_neighbours(loss, eps, dtype):
    """Kept under one label and flipped under the other give the same outputs, to the bit.

    h = 0 is every pair's logit at the first step, when the policy is the reference.
    """
    kw = {"beta": 0.1, "loss": loss, "epsilon": eps}
    keep_seed, flip_seed = coin_seeds(eps)
    for h, (first, second) in itertools.product(
        [1.7, 0.0, -0.3, 37.0, 1e4], [(keep_seed, flip_seed), (flip_seed, keep_seed)]
    ):
        h_a = torch.tensor([h], dtype=dtype, requires_grad=True)
        h_b = torch.tensor([-h], dtype=dtype, requires_grad=True)  # label swapped
        a = private_dpo_loss(h_a, generator=gen(first), **kw)
        b = private_dpo_loss(h_b, generator=gen(second), **kw)
        (g_a,) = torch.autograd.grad(a.loss.sum(), h_a)
        (g_b,) = torch.autograd.grad(b.loss.sum(), h_b)
        assert torch.equal(g_a, -g_b), h  # grad h_b = -grad h_a
        assert torch.equal(a.loggable, b.loggable), h


def test_debiased_rr_has_the_privdpo_gradient():
    h = torch.linspace(-20, 20, 9, dtype=torch.float64, requires_grad=True)
    kw = {"beta": 0.1, "epsilon": 1.5}
    pd = private_dpo_loss(h, loss="privdpo", generator=gen(5), **kw).loss.sum()
    rr = private_dpo_loss(h, loss="rr-dpo", rr_debias=True, generator=gen(5), **kw).loss.sum()
    torch.testing.assert_close(torch.autograd.grad(pd, h)[0], torch.autograd.grad(rr, h)[0])


def test_batch_gradient_of_privdpo_is_unbiased_for_dpo(tiny_model, tokenizer, pairs):
    """Mean PrivDPO batch gradient over many coin draws -> the DPO gradient of a tiny GPT-2."""
    eps, beta, b = 1.0, 0.5, 6
    ref = copy.deepcopy(tiny_model)
    with torch.no_grad():
        for p in tiny_model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen(6)))
    batch = PreferenceCollator(tokenizer, max_length=32)([pairs[i] for i in range(b)])
    with torch.no_grad():
        ref_logps = pair_logps(ref, batch)
    params = [p for p in tiny_model.parameters() if p.requires_grad]

    def flat_grad(scalar: torch.Tensor) -> torch.Tensor:
        grads = torch.autograd.grad(scalar, params, retain_graph=True)
        return torch.cat([g.reshape(-1) for g in grads]).double()

    logps = pair_logps(tiny_model, batch)
    h = dpo_logits(logps[0], logps[1], ref_logps[0], ref_logps[1])
    losses = -torch.nn.functional.logsigmoid(beta * h)
    per_example = torch.stack([flat_grad(losses[i]) for i in range(b)])  # (b, n_params)
    dpo_grad = per_example.mean(dim=0)
    psi = torch.sigmoid(-beta * h.detach()).double()
    assert psi.min() < 0.35 and psi.max() > 0.65  # a spread of intensities

    # The trainer's loss on one draw is the weighted sum of per-example gradients...
    one = private_dpo_loss(h, beta=beta, loss="privdpo", epsilon=eps, generator=gen(7))
    w = privdpo_weights(psi, eps, gen(7))
    torch.testing.assert_close(
        flat_grad(one.loss.mean()), w @ per_example / b, rtol=1e-4, atol=1e-6
    )

    # ... so weights drawn apart from the forward pass give the PrivDPO gradients of many draws.
    def rel_error(n_draws: int, seed: int) -> float:
        weights = privdpo_weights(psi.expand(n_draws, -1), eps, gen(seed))
        mean_grad = (weights.mean(dim=0) @ per_example) / b
        return ((mean_grad - dpo_grad).norm() / dpo_grad.norm()).item()

    small, large = rel_error(100, 8), rel_error(40_000, 9)
    assert large < 0.05
    assert large < small / 4  # ~ 1/sqrt(n): 20x more precise at 400x the draws


def test_randomized_response_flip_probability():
    for eps in EPSILONS:
        flips = randomized_response_flips(torch.Size([200_000]), eps, gen(10))
        expected = 1 / (math.exp(eps) + 1)
        assert flips.double().mean().item() == pytest.approx(expected, abs=4e-3)
        assert 1 - expected == pytest.approx(keep_probability(eps))


@pytest.mark.parametrize("name", ["duchi", "piecewise"])
@pytest.mark.parametrize("eps", EPSILONS)
def test_scalar_mechanisms_are_unbiased_and_bounded(name, eps):
    mechanism, bound = {
        "duchi": (duchi_mechanism, duchi_bound),
        "piecewise": (piecewise_mechanism, piecewise_bound),
    }[name]
    t = torch.tensor([-1.0, -0.4, 0.0, 0.3, 0.98, 1.0], dtype=torch.float64)
    n = 100_000
    out = mechanism(t.expand(n, -1), eps, gen(11))
    c = bound(eps)
    assert out.abs().max() <= c + 1e-12
    se = out.std(dim=0) / math.sqrt(n)
    assert torch.all((out.mean(dim=0) - t).abs() < 5 * se)
    if name == "duchi":
        assert set(out.unique().tolist()) <= {-c, c}
        assert c == pytest.approx((math.exp(eps) + 1) / (math.exp(eps) - 1))
    else:
        assert c == pytest.approx((math.exp(eps / 2) + 1) / (math.exp(eps / 2) - 1))
        left = (c + 1) / 2 * t - (c - 1) / 2
        inside = ((out >= left) & (out <= left + c - 1)).double().mean(dim=0)
        q = math.exp(eps / 2) / (math.exp(eps / 2) + 1)
        assert torch.all((inside - q).abs() < 0.01)


@pytest.mark.parametrize("name", ["duchi", "piecewise"])
def test_scalar_mechanism_output_law_is_within_e_eps_across_inputs(name):
    """Histogram of outputs for the extreme inputs -1 and 1: bin ratios at most e^eps."""
    eps, n = 1.0, 400_000
    mechanism = {"duchi": duchi_mechanism, "piecewise": piecewise_mechanism}[name]
    lo = mechanism(torch.full((n,), -1.0, dtype=torch.float64), eps, gen(12)).numpy()
    hi = mechanism(torch.full((n,), 1.0, dtype=torch.float64), eps, gen(13)).numpy()
    bins = np.linspace(-duchi_bound(eps) * 1.01, duchi_bound(eps) * 1.01, 9)
    if name == "piecewise":
        c = piecewise_bound(eps)
        bins = np.linspace(-c, c, 9)
    h_lo, _ = np.histogram(lo, bins)
    h_hi, _ = np.histogram(hi, bins)
    keep = (h_lo > 0) | (h_hi > 0)
    assert np.all(h_lo[keep] > 0) and np.all(h_hi[keep] > 0)
    ratio = h_lo[keep] / h_hi[keep]
    assert np.max(np.maximum(ratio, 1 / ratio)) <= math.exp(eps) * 1.05


def test_private_losses_refuse_missing_epsilon_and_unknown_names():
    h = torch.zeros(2)
    with pytest.raises(ValueError, match="epsilon"):
        private_dpo_loss(h, beta=0.1, loss="privdpo", epsilon=None, generator=gen())
    with pytest.raises(ValueError, match="loss must be one of"):
        private_dpo_loss(h, beta=0.1, loss="ppo", epsilon=1.0, generator=gen())


def test_same_seed_same_draws():
    h = torch.linspace(-3, 3, 7)
    for loss in ("privdpo", "rr-dpo", "duchi", "piecewise"):
        a = private_dpo_loss(h, beta=0.1, loss=loss, epsilon=1.0, generator=gen(14)).loss
        b = private_dpo_loss(h, beta=0.1, loss=loss, epsilon=1.0, generator=gen(14)).loss
        assert torch.equal(a, b)


def test_label_epsilon_composes_linearly():
    assert label_epsilon(0.5, 3) == 1.5
