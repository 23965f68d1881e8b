"""Embedding-based retrievers: DPS, kNN and MMR.

DPS (dot-product similarity) scores raw pooled embeddings, so a chunk's vector norm counts; kNN scores cosine
similarity (DPS on unit vectors); MMR (maximal marginal relevance) picks, from the ``fetch_k`` most similar chunks,
greedily by ``lambda_mult * sim(query) - (1 - lambda_mult) * max sim(already picked)`` using LangChain's own
implementation.

Exact search (``index=exact``, the default) scores blocks of chunks against all questions and keeps a running top k
(``opi.retrievers.topk``): the ranking of a full sort, in memory bounded by the block, each distinct chunk text
scored once. ``index=faiss`` searches an approximate index (``opi.retrievers.ann``) for corpora beyond exact search.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from opi.chunking import Chunk
from opi.retrievers.base import Ranking, Retriever
from opi.retrievers.topk import DistinctTexts, block_length, top_k
from opi.checks import require_number
from opi.schemas import EmbeddingOverride

INDEXES = ("exact", "faiss")


@dataclass
class _EmbeddingRetriever(Retriever):
    # this retriever's own embedding model (retriever.embedding.model=...): unset settings are the run's embedding
    embedding: EmbeddingOverride = field(default_factory=EmbeddingOverride)
    index: str = "exact"  # exact | faiss (approximate: pip install faiss-cpu)
    normalize: ClassVar[bool] = True

    def __post_init__(self):
        super().__post_init__()
        if self.index not in INDEXES:
            raise ValueError(f"index must be one of {', '.join(INDEXES)}, got {self.index!r}")

    @property
    def label(self) -> str:
        return self.name if self.index == "exact" else f"{self.name} ({self.index})"

    def prepare(self, questions, chunks):
        self._require_embedder().raw([*questions, *(c.text for c in chunks)])

    def _vectors(self, texts: list[str]) -> np.ndarray:
        return self._require_embedder().encode(texts, normalize=self.normalize)

    def score(self, questions, chunks):
        return self._vectors(questions) @ self._vectors([c.text for c in chunks]).T

    def top(self, questions: list[str], chunks: list[Chunk], depth: int) -> tuple[list[Ranking], np.ndarray,
                                                                                  DistinctTexts]:
        """Each question's ``depth`` most similar chunks, the questions' vectors and the chunks' distinct texts."""
        distinct = DistinctTexts.of([c.text for c in chunks])
        q, d = self._vectors(questions), self._vectors(distinct.texts)
        if self.index == "faiss":
            from opi.retrievers.ann import search

            rows, values = search(q, d, depth, metric="inner_product")
        else:
            rows, values = top_k(lambda start, stop: q @ d[start:stop].T, len(q), len(d), depth,
                                 block_length(len(q), q.itemsize))
        return distinct.rankings(rows, values, depth), q, distinct

    def rank(self, questions, chunks, depth):
        return self.top(questions, chunks, depth)[0]


@dataclass
class DPSRetriever(_EmbeddingRetriever):
    name: str = "DPS"
    normalize: ClassVar[bool] = False


@dataclass
class KNNRetriever(_EmbeddingRetriever):
    name: str = "kNN"


@dataclass
class MMRRetriever(_EmbeddingRetriever):
    name: str = "MMR"
    fetch_k: int = 20
    lambda_mult: float = 0.5

    def __post_init__(self):
        super().__post_init__()
        if self.fetch_k < self.k:
            raise ValueError(f"fetch_k ({self.fetch_k}) must be >= k ({self.k})")
        require_number("lambda_mult", self.lambda_mult, ge=0, le=1)

    def rank(self, questions, chunks, depth):
        from langchain_core.vectorstores.utils import maximal_marginal_relevance

        candidates, q, distinct = self.top(questions, chunks, self.fetch_k)
        d = self._vectors(distinct.texts)
        rankings = []
        for query, pool in zip(q, candidates):
            vectors = d[distinct.inverse[list(pool.chunk_ids)]]
            # greedy: the first k picks of a deeper selection are the picks of a selection of k
            picked = maximal_marginal_relevance(query, vectors, lambda_mult=self.lambda_mult, k=depth)
            rankings.append(Ranking(tuple(pool.chunk_ids[i] for i in picked), tuple(pool.scores[i] for i in picked)))
        return rankings
