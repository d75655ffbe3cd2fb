r"""Label-private DPO: PrivDPO and its baselines, as per-example reweightings of the DPO loss.

The DPO gradient of one pair is ``grad L = -psi * v`` with ``v = beta * grad h`` and the
preference intensity ``psi = sigmoid(-beta * h)`` (:mod:`dpprefsyn.train.losses`). Every
mechanism here keeps the direction ``v`` and releases a privatised intensity ``psi~`` in place
of ``psi``: the example's gradient becomes ``-psi~ * v = w * grad L`` with ``w = psi~ / psi``.
Because the label enters the gradient only through ``psi`` and the sign of ``v``, privatising
one scalar per example privatises the whole update.

Derivation of the PrivDPO weight
--------------------------------
Fix an orientation of the pair that does not depend on the label, ``(a, b)``, and write
``p = sigmoid(-beta * h_ab)``, ``v_ab = beta * grad h_ab``. With ``z = 0`` when ``a`` is
preferred and ``z = 1`` otherwise, the DPO gradient is ``(z - p) * v_ab``: the label is the
bit ``z``, everything else is label-free. Randomised response keeps ``z`` with probability
``q = e^eps / (e^eps + 1)``; the unbiased estimate of ``z`` from the reported bit ``z'`` is
``z^ = (z' (e^eps + 1) - 1) / (e^eps - 1)``: ``-1/(e^eps - 1)`` for a reported 0 and
``e^eps/(e^eps - 1)`` for a reported 1. The released coefficient is ``z^ - p``. In the observed
orientation (``a`` = chosen, true ``z = 0``) it is ``-psi~`` with ``psi~ = psi + c``:

* ``c = 1 / (e^eps - 1)`` with probability ``q`` (label kept), so ``w = 1 + (1/psi) / (e^eps - 1)``;
* ``c = -e^eps / (e^eps - 1)`` with probability ``1 - q`` (flipped), so
  ``w = 1 - (1/psi) (1 + 1/(e^eps - 1))``.

This is the formula as usually written: its kept branch
``1 + (1/psi)(1 - (e^eps - 2)/(e^eps - 1))`` simplifies to ``1 + (1/psi)/(e^eps - 1)``.
``E[c] = (e^eps - e^eps)/((e^eps + 1)(e^eps - 1)) = 0``, so ``E[w] = 1`` for every ``psi``
and, ``psi`` being gradient-stopped, ``E[w grad L] = grad L``. The same weights arise from the
debiased randomised-response loss ``((1 - rho) L(y_w, y_l) - rho L(y_l, y_w)) / (1 - 2 rho)``
with ``rho = 1/(e^eps + 1)``: PrivDPO has that loss's gradient, not its value (``rr-dpo`` with
``rr_debias=True``).

The loss's gradient in ``h`` is set to ``-beta * psi~`` (:func:`released_dpo_loss`), not
derived by autograd from ``w * L``, which would add ``-beta psi`` and ``-beta c``: two
roundings whose last bits differ between the two labels of a pair. For PrivDPO, ``psi~`` is
computed in the label-free orientation (:func:`privdpo_intensity`), so that neighbouring
labels give bit-identical sets of released gradients. The loss value ``w * L`` is written
as ``L + c * L/psi`` (:func:`_loss_over_intensity`): ``psi`` underflows to 0 for confident
pairs, even in float64, where ``1/psi`` would turn it into ``inf * 0``.

Privacy
-------
Mechanism
    Per example and per pass, randomised response on the preference label, released through
    the reweighted gradient (``privdpo``); the baselines release the flipped label (``rr-dpo``)
    or Duchi's or the Piecewise mechanism applied to ``psi`` (``duchi``, ``piecewise``; Wang et
    al., 2019), each with ``psi~ = M(psi)``, unbiased for ``psi``.
Neighbouring
    Label DP: two datasets are neighbours when one record's label is swapped, ``(x, y_w, y_l)``
    against ``(x, y_l, y_w)``; prompts and responses are public to the mechanism. The swap maps
    ``psi -> 1 - psi`` and ``v -> -v``, so the output to compare is the released gradient
    coefficient on the label-free ``v_ab``: ``-psi~`` when ``a`` is preferred and ``+psi~``
    when ``b`` is. For PrivDPO it takes two values, ``-p - 1/(e^eps - 1)`` and
    ``e^eps/(e^eps - 1) - p``, with probabilities ``(q, 1 - q)`` under one label and
    ``(1 - q, q)`` under the other: a ratio of ``e^eps``. In floating point too: the two
    values are computed from label-free quantities, then negated exactly where the
    orientation flips (an attack after [3]_ reads the label from any bit that differs). For
    Duchi and Piecewise the coefficient is ``-M(p)`` against ``M(1 - p)``, which has the law
    of ``-M(p - 1)`` since both mechanisms are odd-symmetric; ``p`` and ``p - 1`` lie in their
    input domain ``[-1, 1]``, so the ratio is ``e^eps`` too.
Epsilon
    One pass over a random permutation in disjoint mini-batches touches each label once; the
    model a step uses depends on other records only through their own randomised outputs, so a
    pass is ``eps``-label-DP. Each pass draws fresh coins: ``k`` passes give ``k * eps``
    (:func:`label_epsilon`). Coins must never be shared between pairs (a pair whose label is
    known would reveal the coin of another): the trainer draws them from a generator keyed by
    a per-run secret (128 bits of OS entropy; the training seed is public), process, step and
    micro-batch. The training loss the trainer logs is a function of
    the released outputs only (:attr:`PrivatizedLoss.loggable`); the loss value ``w * L`` is
    not, and is not logged.
Not covered
    Which prompts and responses are in the data (add/remove DP), and any evaluation on the
    training pairs: both reveal more than the label budget says.

References
----------
.. [1] Wang, N. et al. "Collecting and analyzing multidimensional data with local
   differential privacy", ICDE 2019 (Duchi's and the Piecewise mechanism, eq. 1-5).
.. [2] Warner, S. L. "Randomized response", JASA 1965.
.. [3] Mironov, I. "On significance of the least significant bits for differential
   privacy", CCS 2012.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

PRIVATE_LOSSES = ("privdpo", "rr-dpo", "duchi", "piecewise")
"""Losses that spend a label-epsilon per pass."""

LOSSES = ("dpo", *PRIVATE_LOSSES)


def label_epsilon(epsilon: float, epochs: int) -> float:
    """Label-epsilon of ``epochs`` passes, each ``epsilon``-label-DP: basic composition."""
    return float(epsilon) * int(epochs)


def keep_probability(epsilon: float) -> float:
    """Probability that randomised response reports the true label: ``e^eps / (e^eps + 1)``."""
    return 1.0 / (1.0 + math.exp(-epsilon))


def _uniform(shape: torch.Size, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """U[0, 1) draws from ``generator`` on its own device, moved to ``device``.

    Drawing on the generator's device keeps a CPU generator usable for CUDA training, and the
    draws independent of the forward pass.
    """
    return torch.rand(shape, generator=generator, dtype=torch.float64).to(device)


# --- PrivDPO -------------------------------------------------------------------------------


def privdpo_offsets(epsilon: float) -> tuple[float, float]:
    """Intensity offsets ``c`` of PrivDPO, ``(kept, flipped)``: ``psi~ = psi + c``."""
    inv = 1.0 / math.expm1(epsilon)
    return inv, -(1.0 + inv)


def privdpo_keep(shape: torch.Size, epsilon: float, generator: torch.Generator) -> torch.Tensor:
    """Randomised-response coins: True (keep the label) with probability ``e^eps/(e^eps+1)``."""
    return _uniform(shape, generator, torch.device("cpu")) < keep_probability(epsilon)


def privdpo_weights(psi: torch.Tensor, epsilon: float, generator: torch.Generator) -> torch.Tensor:
    """PrivDPO loss weights ``w = 1 + c / psi`` (module docstring), one draw per example.

    Parameters
    ----------
    psi : Tensor
        Preference intensities, in (0, 1), gradient-stopped.
    epsilon : float
        Label epsilon of one pass, > 0.
    generator : torch.Generator
        Source of the coins.

    Returns
    -------
    Tensor
        Shape of ``psi``; ``E[w] = 1``.
    """
    keep = privdpo_keep(psi.shape, epsilon, generator).to(psi.device)
    return 1.0 + _privdpo_offset(keep, epsilon, psi.dtype) / psi


def privdpo_intensity(x: torch.Tensor, keep: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Released intensity ``psi~ = psi + c`` of PrivDPO, in the same bits under both labels.

    Parameters
    ----------
    x : Tensor
        ``beta * h`` in float64, gradient-stopped.
    keep : Tensor of bool
        The coins of :func:`privdpo_keep`.
    epsilon : float
        Label epsilon of one pass, > 0.

    Notes
    -----
    The orientation ``(a, b)`` with ``h_ab = |h|``, the model's own ranking of the pair, is the
    same under both labels. In it the coefficient released on ``v_ab`` is ``z^ - p = +-m + r``,
    ``m = 1/2 + 1/(e^eps - 1)`` signed by the reported bit and ``r = 1/2 - sigmoid(-|x|)``, and
    ``psi~`` is that coefficient negated where ``a`` is the chosen response. ``psi + c`` is the
    same number but not the same bits: it rounds ``sigmoid(-x)`` under one label and
    ``sigmoid(x)`` under the other. At ``h = 0`` both labels take ``a`` to be the chosen
    response, which is harmless: ``r = 0`` there, so the two outputs are ``-m`` and ``+m``.
    """
    chosen_ahead = x >= 0
    reports_b = chosen_ahead != keep
    m = torch.tensor(0.5 + 1.0 / math.expm1(epsilon), dtype=torch.float64, device=x.device)
    coefficient = torch.where(reports_b, m, -m) + (0.5 - torch.sigmoid(-x.abs()))
    return torch.where(chosen_ahead, -coefficient, coefficient)


def _privdpo_offset(keep: torch.Tensor, epsilon: float, dtype: torch.dtype) -> torch.Tensor:
    """Map each coin to its offset ``c``, in ``dtype`` (``torch.where`` on floats gives float32)."""
    kept, flipped = (
        torch.tensor(c, dtype=dtype, device=keep.device) for c in privdpo_offsets(epsilon)
    )
    return torch.where(keep, kept, flipped)


def privdpo_weight_distribution(
    psi: torch.Tensor, epsilon: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the exact two-point law of the PrivDPO weight.

    Returns
    -------
    values : Tensor of shape (*psi.shape, 2)
        Weight when the label is kept, then when it is flipped.
    probs : Tensor of shape (2,)
        ``(e^eps/(e^eps+1), 1/(e^eps+1))``.
    """
    offsets = torch.tensor(privdpo_offsets(epsilon), dtype=psi.dtype, device=psi.device)
    q = keep_probability(epsilon)
    return 1.0 + offsets / psi.unsqueeze(-1), torch.tensor([q, 1.0 - q], dtype=torch.float64)


# --- Baselines -----------------------------------------------------------------------------


def randomized_response_flips(
    shape: torch.Size, epsilon: float, generator: torch.Generator
) -> torch.Tensor:
    """Label flips of randomised response: True with probability ``1/(e^eps + 1)``."""
    return ~privdpo_keep(shape, epsilon, generator)


def duchi_bound(epsilon: float) -> float:
    """Magnitude ``(e^eps + 1)/(e^eps - 1)`` of both outputs of Duchi's mechanism."""
    return 1.0 / math.tanh(epsilon / 2)


def duchi_mechanism(t: torch.Tensor, epsilon: float, generator: torch.Generator) -> torch.Tensor:
    """Duchi et al.'s one-dimensional mechanism ([1]_, Algorithm 1): unbiased, two outputs.

    Reports ``+B`` with probability ``1/2 + t (e^eps - 1)/(2 (e^eps + 1))``, else ``-B``, with
    ``B = duchi_bound(epsilon)``. Inputs must lie in [-1, 1].
    """
    bound = duchi_bound(epsilon)
    p_plus = 0.5 + 0.5 * t.double() / bound
    up = _uniform(t.shape, generator, t.device) < p_plus
    return (bound * (2 * up.double() - 1)).to(t.dtype)


def piecewise_bound(epsilon: float) -> float:
    """Output bound ``C = (e^(eps/2) + 1)/(e^(eps/2) - 1)`` of the Piecewise mechanism."""
    return 1.0 / math.tanh(epsilon / 4)


def piecewise_mechanism(
    t: torch.Tensor, epsilon: float, generator: torch.Generator
) -> torch.Tensor:
    """Wang et al.'s Piecewise mechanism ([1]_, Algorithm 2): unbiased, output in [-C, C].

    With probability ``e^(eps/2)/(e^(eps/2) + 1)`` the output is uniform on
    ``[l(t), r(t)]``, ``l(t) = (C + 1)/2 t - (C - 1)/2`` and ``r(t) = l(t) + C - 1``; otherwise
    uniform on ``[-C, l(t)) U (r(t), C]``. The density inside is ``e^eps`` times the one
    outside, whatever ``t`` in [-1, 1].
    """
    c = piecewise_bound(epsilon)
    td = t.double()
    left = (c + 1) / 2 * td - (c - 1) / 2
    centre = _uniform(t.shape, generator, t.device) < 1.0 / (1.0 + math.exp(-epsilon / 2))
    u = _uniform(t.shape, generator, t.device)
    inside = left + u * (c - 1)
    # The outside is two intervals of total length C + 1: walk along them from -C.
    walk = u * (c + 1) - c
    outside = torch.where(walk < left, walk, walk + (c - 1))
    return torch.where(centre, inside, outside).to(t.dtype)


SCALAR_MECHANISMS = {"duchi": duchi_mechanism, "piecewise": piecewise_mechanism}


# --- The privatised loss --------------------------------------------------------------------


@dataclass(frozen=True)
class PrivatizedLoss:
    """One mini-batch's per-example losses under a mechanism.

    Attributes
    ----------
    loss : Tensor of shape (batch,)
        What to backpropagate: its gradient is the privatised one.
    loggable : Tensor of shape (batch,)
        Gradient-free value safe to log: the DPO loss under the label the released gradient
        points to (for ``rr-dpo``, ``loss`` itself). It is a function of the released output,
        so logging it costs no budget; ``loss`` is not, under ``privdpo``, ``duchi`` and
        ``piecewise``.
    """

    loss: torch.Tensor
    loggable: torch.Tensor


def _loss_over_intensity(x: torch.Tensor) -> torch.Tensor:
    """``L / psi = softplus(-x) / sigmoid(-x)`` for ``x = beta * h``: 1 where both underflow."""
    return torch.where(x > 40, 1.0, F.softplus(-x) / torch.sigmoid(-x))


def released_dpo_loss(h: torch.Tensor, beta: float, intensity: torch.Tensor) -> torch.Tensor:
    """Per-example loss whose gradient in ``h`` is ``-beta * intensity`` to the last bit.

    ``intensity`` is the released ``psi~`` (float64). The value, ``w * L_DPO`` with
    ``w = psi~ / psi``, is not released; the gradient is set rather than derived from it, so
    that its bits are a function of ``psi~`` alone. ``psi~ = psi`` gives the DPO loss and
    gradient up to rounding.
    """
    x = beta * h.detach().double()
    value = F.softplus(-x) + (intensity - torch.sigmoid(-x)) * _loss_over_intensity(x)
    slope = (-beta * intensity).to(h.dtype)
    return value.to(h.dtype) + slope * (h - h.detach())


def private_dpo_loss(
    h: torch.Tensor,
    *,
    beta: float,
    loss: str,
    epsilon: float | None,
    generator: torch.Generator,
    rr_debias: bool = False,
) -> PrivatizedLoss:
    """Per-example DPO loss of one mini-batch under ``loss``, one fresh draw per example.

    Parameters
    ----------
    h : Tensor of shape (batch,)
        DPO logits, :func:`~dpprefsyn.train.losses.dpo_logits`.
    beta : float
        DPO temperature.
    loss : {"dpo", "privdpo", "rr-dpo", "duchi", "piecewise"}
        Mechanism; ``"dpo"`` is the non-private loss and draws nothing.
    epsilon : float or None
        Label epsilon of one pass; required for the private losses.
    generator : torch.Generator
        Source of all randomness, so that a seed repeats a run.
    rr_debias : bool, default=False
        For ``rr-dpo``: use the unbiased loss ``((1-rho) L - rho L_swapped)/(1 - 2 rho)``
        instead of DPO on the flipped labels.

    Returns
    -------
    PrivatizedLoss
    """
    x = beta * h
    if loss == "dpo":
        value = -F.logsigmoid(x)
        return PrivatizedLoss(value, value.detach())
    if loss not in PRIVATE_LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if epsilon is None or not epsilon > 0:
        raise ValueError(f"loss {loss!r} needs a positive epsilon, got {epsilon}")
    if loss == "rr-dpo":
        x_seen = torch.where(
            randomized_response_flips(h.shape, epsilon, generator).to(h.device), -x, x
        )
        value = -F.logsigmoid(x_seen)
        if rr_debias:
            rho = 1.0 - keep_probability(epsilon)
            value = ((1 - rho) * value + rho * F.logsigmoid(-x_seen)) / (1 - 2 * rho)
        return PrivatizedLoss(value, value.detach())
    xd = x.detach().double()
    if loss == "privdpo":
        kept_label = privdpo_keep(h.shape, epsilon, generator).to(h.device)
        intensity = privdpo_intensity(xd, kept_label, epsilon)
    else:
        psi = torch.sigmoid(-xd)
        intensity = SCALAR_MECHANISMS[loss](psi, epsilon, generator)
        # The released gradient is -psi~ v: it "keeps" the label iff psi~ >= psi - 1/2.
        kept_label = intensity - psi >= -0.5
    loggable = torch.where(kept_label, -F.logsigmoid(x), -F.logsigmoid(-x)).detach()
    return PrivatizedLoss(released_dpo_loss(h, beta, intensity), loggable)
