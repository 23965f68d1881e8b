"""What every embedder shares: texts -> raw vectors, each distinct text computed once — looked up in this process's
memory, then in the persistent store (``opi.embeddings.store``), and only then computed, in slices of a few
seconds' work so that a process told to stop (SIGTERM, Ctrl-C) stops within seconds. Unit vectors for cosine are
derived from the same raw vectors. Subclasses say how a slice is computed (``compute``) and what names the
model's content (``key``)."""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import Counter

import numpy as np
from langchain_core.embeddings import Embeddings

from opi.embeddings.store import EmbeddingStore
from opi.embeddings.work import record
from opi.interrupt import exiting


def unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


class ModelUnavailable(RuntimeError):
    """A model the run cannot use when it needs it (one that cannot be loaded: ``opi.embeddings.local.unavailable``;
    one whose vectors changed length under its name), said in one line and exit 2: a user error
    ``flows.base.errors.explained`` says as it is."""


class EmbeddingInterrupted(RuntimeError):
    """The process is exiting (SIGTERM, Ctrl-C): texts still to embed were left."""


class Embedder(Embeddings, ABC):
    """``normalize`` selects unit vectors for the LangChain view (``embed_documents``, ``embed_query``)."""

    slice_texts = 1024  # texts per slice between checks for an exiting process

    def __init__(self, batch_size: int, normalize: bool = True, store: EmbeddingStore | None = None):
        self.batch_size = batch_size
        self.normalize = normalize
        self.store = store
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.texts_embedded = 0  # texts computed (by the model, or sent to an endpoint)
        self.store_hits = 0  # texts read from the persistent store
        self.cache_hits = 0  # texts this process had already

    @property
    @abstractmethod
    def key(self) -> str:
        """Names the model's content, its backend and that vectors are raw: the store's key for its vectors."""

    @property
    @abstractmethod
    def name(self) -> str:
        """How runs show the model."""

    @abstractmethod
    def compute(self, texts: list[str]) -> np.ndarray:
        """Raw vectors of ``texts``, one row each."""

    def load(self) -> None:
        """Ready to embed now rather than at the first texts (a model loaded); nothing to do by default (an
        endpoint)."""

    def raw(self, texts: list[str]) -> np.ndarray:
        """Raw vectors, one row per text, computing only texts neither this process nor the store has. What it
        took is added to the block's count of embedding work (``opi.embeddings.work.counting``)."""
        if not texts:  # before the lock: the width may take a vector (``dimension``), a call of its own
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:  # every call of this embedder waits for it: the difference below is this call's alone
            before = self.work_counts()
            try:
                return self._raw(texts)
            finally:
                after = self.work_counts()
                record({name: value - before.get(name, 0.0) for name, value in after.items()})

    def _raw(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        self.cache_hits += len(texts) - len(missing)
        if missing and self.store is not None:
            stored = self._readable(self.store.get(self.key, missing))
            self._cache.update(stored)
            self.store_hits += len(stored)
            missing = [t for t in missing if t not in stored]
        for start in range(0, len(missing), self.slice_texts):
            if exiting():
                raise EmbeddingInterrupted("stopped: the process is exiting")
            part = missing[start:start + self.slice_texts]
            vectors = np.asarray(self.compute(part), dtype=np.float32)
            self._same_length(vectors)
            self._cache.update(zip(part, vectors))
            if self.store is not None:
                self.store.put(self.key, zip(part, vectors))
            self.texts_embedded += len(part)
        return np.stack([self._cache[t] for t in texts])

    def _same_length(self, vectors: np.ndarray) -> None:
        """New vectors as long as those held for the model (this run's and its store's): otherwise the model behind
        its name changed (an endpoint now serving another), and the two kinds would be compared as one."""
        held = next(iter(self._cache.values()), None)
        if held is not None and vectors.ndim == 2 and vectors.shape[1] != len(held):
            raise ModelUnavailable(
                f"the embedding model {self.name} now gives vectors of {vectors.shape[1]} numbers, and those already "
                f"held for it (this run's, or the embedding store's) have {len(held)}: the model behind the name "
                f"changed. Give the new one a name (or, for an endpoint, its dimensions) of its own, or move "
                f"paths.embedding_store away to embed everything again")

    def work_counts(self) -> dict[str, float]:
        """This embedder's work so far, by the names runs log it under: texts computed, texts read from the store,
        and an endpoint's usage (``embedding_calls``, ...)."""
        usage = getattr(self, "usage", None)  # an endpoint's (``opi.embeddings.endpoint``)
        return {"texts_embedded": float(self.texts_embedded), "texts_from_embedding_store": float(self.store_hits),
                **(usage.as_metrics("embedding") if usage is not None else {})}

    def _readable(self, stored: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The stored vectors of the model's length (that of the vectors already held, else the most common):
        another length is an entry damaged or written by something else, a miss."""
        if not stored:
            return stored
        known = next(iter(self._cache.values()), None)
        length = len(known) if known is not None else Counter(map(len, stored.values())).most_common(1)[0][0]
        return {text: vector for text, vector in stored.items() if len(vector) == length}

    def encode(self, texts: list[str], normalize: bool | None = None) -> np.ndarray:
        vectors = self.raw(texts)
        return unit(vectors) if (self.normalize if normalize is None else normalize) else vectors

    @property
    def unique_texts(self) -> int:
        return len(self._cache)

    @property
    def dimension(self) -> int:
        """The length of the model's vectors: from a vector this process or the store already has, else from one
        text embedded to learn it (a paid request on an endpoint)."""
        known = next(iter(self._cache.values()), None)
        if known is not None:
            return len(known)
        stored = self.store.length(self.key) if self.store is not None else None
        return stored if stored else len(self.raw(["dimension"])[0])

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.encode(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.encode([text])[0].tolist()
