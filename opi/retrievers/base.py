"""The one retriever interface: every retriever ranks an article's chunks for a batch of questions.

A ``Ranking`` is the same shape for every retriever and for fusions of them, so combination and IR metrics are
pure functions over it (the BEIR pattern). Rankings are in rank order; for MMR the order, not the score, is what
counts. A retriever ranks to the ``depth`` it is asked for (the deepest cut a run needs) and never cuts to its own
``k``: ``Ranking.top`` is the one cut, applied by the run to each member at its ``k`` and to a fusion at the
combination's ``k``. One ranking therefore serves every ``k`` (``-m retriever.k=2,4,8`` ranks once).

A retriever is a dataclass: its fields are its settings (``conf/retriever/<name>.yaml`` names the class with
``_target_``; ``opi.components`` derives the config schema from the fields), ``__post_init__`` checks them, and
``embedder`` is the one resource it may be given. A retriever of your own is a subclass in any importable module
that implements ``score`` (one score per chunk, higher is better) or ``rank``:
``opi-eval retriever=custom retriever._target_=my_pkg.MyRetriever``.
"""
from __future__ import annotations

import dataclasses
import inspect
from abc import ABC
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from opi.chunking import Chunk


class RetrievalTooSlow(ValueError):
    """A ranking that would take hours, refused before it starts: the message says how long and what to set."""


class ScoresUnusable(ValueError):
    """A retriever's ``score`` returned what cannot rank the chunks (another shape than questions x chunks, or
    values that are not numbers): a retriever of one's own, said in one line instead of rankings missing chunks."""


class VectorStoreUnavailable(ValueError):
    """A vector store that cannot be evaluated (unreachable, no such collection, vectors of another dimension than
    the query embedding's): one line, before any example."""


@dataclass(frozen=True)
class Ranking:
    chunk_ids: tuple[int, ...]
    scores: tuple[float, ...]

    def top(self, k: int | None) -> "Ranking":
        """The first ``k`` chunks (all of them for ``None``): the one cut of a ranking."""
        return self if k is None else Ranking(self.chunk_ids[:k], self.scores[:k])

    @classmethod
    def from_order(cls, order: Sequence[int], scores: Sequence[float] | np.ndarray, depth: int) -> "Ranking":
        """The first ``depth`` chunks of ``order`` with their scores (``scores`` indexed by chunk id)."""
        chosen = [int(i) for i in order[:depth]]
        return cls(tuple(chosen), tuple(float(scores[i]) for i in chosen))

    @classmethod
    def from_scores(cls, scores: np.ndarray, depth: int) -> "Ranking":
        """Highest scores first; ties go to the earlier chunk (stable), so rankings are deterministic."""
        return cls.from_order(np.argsort(-np.asarray(scores, dtype=float), kind="stable"), scores, depth)

    @classmethod
    def by_position(cls, chunk_ids: Sequence[int]) -> "Ranking":
        """A ranking known only by its order (random, oracle, a LangChain retriever): score 1/rank."""
        return cls(tuple(int(i) for i in chunk_ids), tuple(1.0 / (r + 1) for r in range(len(chunk_ids))))


@dataclass
class Retriever(ABC):
    """Ranks the chunks of one article for many questions at once (the index is built once per article)."""

    name: str = "retriever"  # how runs and reports show it
    k: int = 4  # chunks handed on per question (LangChain's default, the paper's setting)
    embedder: Any = field(default=None, repr=False, compare=False)
    # k is applied after ranking (Ranking.top) and name only labels runs: a ranking depends on neither, so a cache
    # of rankings leaves them out of its key and one ranking serves -m retriever.k=2,4,8; a retriever's own
    # embedding settings reach the ranking task resolved, as its embedding model (a key of its own)
    excluded_from_keys: ClassVar[tuple[str, ...]] = ("k", "name", "embedding")
    # ranks with the embedder it is given: its rankings depend on the embedding code too (a retriever of your own
    # that never embeds may say False, and keeps its rankings when that code changes)
    embeds: ClassVar[bool] = True
    bound: ClassVar[str | None] = None  # "lower" or "upper": a bound on retrieval (random, oracle), not a retriever
    needs_evidence: ClassVar[bool] = False  # ranks by the examples' gold evidence (the oracle)
    local_models: ClassVar[tuple[str, ...]] = ()  # settings naming models to load, checked before the run
    # ranks by asking a service whose content can change between runs (a vector database): its rankings, and the
    # configuration's whole result, are never kept
    live: ClassVar[bool] = False

    def __post_init__(self):
        if not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")

    @property
    def label(self) -> str:
        """How runs show the retriever: its name, and any approximation it makes."""
        return self.name

    def score(self, questions: list[str], chunks: list[Chunk]) -> np.ndarray:
        """One row of chunk scores per question (higher is better); or override ``rank``."""
        raise NotImplementedError(f"{type(self).__name__} implements neither score() nor rank()")

    def rank(self, questions: list[str], chunks: list[Chunk], depth: int) -> list[Ranking]:
        """One ranking of at most ``depth`` chunk ids per question."""
        return [Ranking.from_scores(row, depth) for row in self.checked(self.score(questions, chunks), questions,
                                                                            chunks)]

    def checked(self, scores: Any, questions: list[str], chunks: list[Chunk]) -> np.ndarray:
        """``score``'s result as a questions x chunks array of numbers, or ScoresUnusable naming the retriever."""
        where = f"{type(self).__module__}.{type(self).__qualname__}.score"
        try:
            array = np.asarray(scores, dtype=float)
        except (TypeError, ValueError) as err:
            raise ScoresUnusable(f"{where} returned scores that are not numbers ({err})") from None
        if array.shape != (len(questions), len(chunks)):
            raise ScoresUnusable(f"{where} returned scores of shape {array.shape} for {len(questions)} questions and "
                                 f"{len(chunks)} chunks: it must score every chunk for every question "
                                 f"({len(questions)} x {len(chunks)})")
        if np.isnan(array).any():
            raise ScoresUnusable(f"{where} returned NaN for {int(np.isnan(array).sum())} of {array.size} scores: "
                                 "give every chunk a number (-inf ranks it last)")
        return array

    def prepare(self, questions: list[str], chunks: list[Chunk]) -> None:
        """Work worth doing once for all the questions and indexes of a run, before they are ranked index by index
        (retrievers that embed: one model call)."""

    def rank_examples(self, examples: list, chunks: list[Chunk], depth: int) -> list[Ranking]:
        """One ranking per example; retrievers that need more than the question (the oracle) override it."""
        questions = [e.question for e in examples]
        if "depth" in inspect.signature(self.rank).parameters:
            return self.rank(questions, chunks, depth)
        # a retriever written before depths (rank(questions, chunks), cut to its own k): asked at k = depth
        return dataclasses.replace(self, k=depth).rank(questions, chunks)

    def _require_embedder(self):
        if self.embedder is None:
            raise ValueError(f"{type(self).__name__} needs an embedder")
        return self.embedder
