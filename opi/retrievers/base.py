"""The one retriever interface: every retriever ranks an article's chunks for a batch of questions.

A ``Ranking`` is the same shape for all seven retrievers and for fusions of them, so combination and IR metrics
are pure functions over it (the BEIR pattern). Rankings are in rank order; for MMR the order, not the score, is
what counts.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from opi.chunking import Chunk


@dataclass(frozen=True)
class Ranking:
    chunk_ids: tuple[int, ...]
    scores: tuple[float, ...]

    def top(self, k: int | None) -> "Ranking":
        return self if k is None else Ranking(self.chunk_ids[:k], self.scores[:k])


def top_k(scores: np.ndarray, k: int) -> Ranking:
    """Highest scores first; ties go to the earlier chunk (stable), so rankings are deterministic."""
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")[:k]
    return Ranking(tuple(int(i) for i in order), tuple(float(scores[i]) for i in order))


class Retriever(ABC):
    """Ranks the chunks of one article for many questions at once (the index is built once per article)."""

    name: str = "retriever"

    def __init__(self, k: int = 4, embedder: Any = None):
        if k < 1:
            raise ValueError(f"{type(self).__name__}: k must be >= 1, got {k}")
        self.k = k
        self.embedder = embedder

    @abstractmethod
    def rank(self, questions: list[str], chunks: list[Chunk]) -> list[Ranking]:
        """One ranking of at most ``k`` chunk ids per question."""

    def _require_embedder(self):
        if self.embedder is None:
            raise ValueError(f"{type(self).__name__} needs an embedder")
        return self.embedder
