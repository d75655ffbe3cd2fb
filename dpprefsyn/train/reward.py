"""The private preference model as an RL reward: text in, one scalar per response out.

Scoring generated text with a :class:`~dpprefsyn.artifact.PreferenceModel` only reads the DP
release, so RL against it spends no privacy budget (post-processing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from dpprefsyn.artifact import PreferenceModel

if TYPE_CHECKING:
    import torch

    from dpprefsyn.templates import PromptTemplate

__all__ = ["PairEncoder", "PrivateRewardFunction"]

Scoring = Literal["mean", "mixture"]
SCORINGS: tuple[str, ...] = ("mean", "mixture")


class PairEncoder(Protocol):
    """What the reward needs of an embedder: :meth:`dpprefsyn.embedding.Embedder.encode_pairs`."""

    def encode_pairs(
        self, prompts: Sequence[str], responses: Sequence[str], template: str | PromptTemplate
    ) -> np.ndarray:
        """Embed pair ``i`` as psi(prompts[i], responses[i]), shape ``(n, d)``."""
        ...


class PrivateRewardFunction:
    """Reward of generated responses under a private preference model.

    Parameters
    ----------
    model : PreferenceModel
        The DP release; its ``embedder`` settings (weights, window, template) say how responses
        must be embedded, since its rewards are linear in *that* embedding only.
    scoring : {"mean", "mixture"}, default="mean"
        ``mean`` averages the kept clusters' rewards (the method's PPO reward); ``mixture``
        weights them by the noisy cluster probabilities.
    embedder : PairEncoder or None, default=None
        Anything with ``encode_pairs(prompts, responses, template)``. None builds an
        :class:`~dpprefsyn.embedding.Embedder` from the model's settings on first call, so that
        constructing a reward loads nothing.
    device : str or None, default=None
        Device of the embedder built when ``embedder`` is None; None lets it choose.

    Notes
    -----
    **Privacy.** The reward reads only the released projection, rewards and cluster weights:
    it is post-processing of the DP fit and spends no budget, however many responses it scores.

    Examples
    --------
    >>> reward = PrivateRewardFunction(PreferenceModel.load("pm"))  # doctest: +SKIP
    >>> reward(["Hi"], ["Hello! How can I help?"])  # doctest: +SKIP
    tensor([0.0312])
    """

    def __init__(
        self,
        model: PreferenceModel,
        *,
        scoring: Scoring = "mean",
        embedder: PairEncoder | None = None,
        device: str | None = None,
    ) -> None:
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
        self.model = model
        self.scoring = scoring
        self.embedder = embedder
        self.device = device
        self._encoder: PairEncoder | None = embedder

    def __repr__(self) -> str:
        """Parameters only: nothing scored passes through here."""
        return (
            f"PrivateRewardFunction(n_clusters={self.model.n_clusters}, "
            f"scoring={self.scoring!r}, embedder={self.embedder!r})"
        )

    def load(self) -> PrivateRewardFunction:
        """Build and load the model's own embedder (once); calls do this for you.

        Returns
        -------
        self : PrivateRewardFunction

        Raises
        ------
        ValueError
            If the loaded weights, window or truncation rule differ from those the model was
            fitted with: the rewards would then score a different embedding.
        """
        if self._encoder is not None:
            return self
        from dpprefsyn.embedding import Embedder

        embedder = Embedder.for_fitted(self.model.embedder, device=self.device, show_progress=False)
        self._encoder = embedder
        return self

    def embed(self, prompts: Sequence[str], responses: Sequence[str]) -> np.ndarray:
        """psi(x, a) of each pair with the model's template, shape ``(n, d)``."""
        from dpprefsyn.templates import get_template

        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
        template = get_template(self.model.embedder.get("template", "dialogue"))
        return self.load()._encoder.encode_pairs(list(prompts), list(responses), template)

    def __call__(self, prompts: Sequence[str], responses: Sequence[str]) -> torch.Tensor:
        """Reward of each ``(prompts[i], responses[i])``, a float32 tensor of shape ``(n,)``."""
        import torch

        psi = self.embed(prompts, responses)
        if self.scoring == "mean":
            scores = self.model.mean_reward(psi)
        else:
            scores = self.model.mixture_reward(psi)
        return torch.from_numpy(np.asarray(scores, dtype=np.float32))
