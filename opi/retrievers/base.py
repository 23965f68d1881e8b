"""The one retriever interface: every retriever ranks an article's chunks for a batch of questions.

A ``Ranking`` is the same shape for every retriever and for fusions of them, so combination and IR metrics are
pure functions over it (the BEIR pattern). Rankings are in rank order; for MMR the order, not the score, is what
counts.

A retriever is a dataclass: its fields are its settings (``conf/retriever/<name>.yaml`` names the class with
``_target_``; ``opi.components`` derives the config schema from the fields), ``__post_init__`` checks them, and
``embedder`` is the one resource it may be given. A retriever of your own is a subclass in any importable module:
``opi-eval retriever=custom retriever._target_=my_pkg.MyRetriever``.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
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


@dataclass
class Retriever(ABC):
    """Ranks the chunks of one article for many questions at once (the index is built once per article)."""

    name: str = "retriever"  # how runs and reports show it
    k: int = 4  # chunks returned per question (LangChain's default, the paper's setting)
    embedder: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")

    @abstractmethod
    def rank(self, questions: list[str], chunks: list[Chunk]) -> list[Ranking]:
        """One ranking of at most ``k`` chunk ids per question."""

    def prepare(self, questions: list[str], chunks: list[Chunk]) -> None:
        """Work worth doing once for all the questions and indexes of a run, before they are ranked index by index
        (retrievers that embed: one model call)."""

    def rank_examples(self, examples: list, chunks: list[Chunk]) -> list[Ranking]:
        """One ranking per example; retrievers that need more than the question (the oracle) override it."""
        return self.rank([e.question for e in examples], chunks)

    def _require_embedder(self):
        if self.embedder is None:
            raise ValueError(f"{type(self).__name__} needs an embedder")
        return self.embedder
