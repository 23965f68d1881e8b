"""Embedding-based retrievers: DPS, kNN and MMR.

DPS (dot-product similarity) scores raw pooled embeddings, so a chunk's vector norm counts; kNN scores cosine
similarity (DPS on unit vectors); MMR (maximal marginal relevance) picks, from the ``fetch_k`` most similar chunks,
greedily by ``lambda_mult * sim(query) - (1 - lambda_mult) * max sim(already picked)`` using LangChain's own
implementation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from opi.chunking import Chunk
from opi.retrievers.base import Ranking, Retriever
from opi.schemas import EmbeddingOverride


@dataclass
class _EmbeddingRetriever(Retriever):
    # this retriever's own embedding model (retriever.embedding.model=...): unset settings are the run's embedding
    embedding: EmbeddingOverride = field(default_factory=EmbeddingOverride)
    normalize: ClassVar[bool] = True

    def prepare(self, questions, chunks):
        self._require_embedder().raw([*questions, *(c.text for c in chunks)])

    def _vectors(self, questions: list[str], chunks: list[Chunk]) -> tuple[np.ndarray, np.ndarray]:
        embedder = self._require_embedder()
        return (embedder.encode(questions, normalize=self.normalize),
                embedder.encode([c.text for c in chunks], normalize=self.normalize))

    def score(self, questions, chunks):
        q, d = self._vectors(questions, chunks)
        return q @ d.T


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
        if not 0.0 <= self.lambda_mult <= 1.0:
            raise ValueError(f"lambda_mult must be in [0, 1], got {self.lambda_mult}")

    def rank(self, questions, chunks, depth):
        from langchain_core.vectorstores.utils import maximal_marginal_relevance

        q, d = self._vectors(questions, chunks)
        rankings = []
        for query, sims in zip(q, q @ d.T):
            candidates = Ranking.from_scores(sims, self.fetch_k).chunk_ids
            # greedy: the first k picks of a deeper selection are the picks of a selection of k
            picked = maximal_marginal_relevance(query, d[list(candidates)], lambda_mult=self.lambda_mult, k=depth)
            rankings.append(Ranking.from_order([candidates[i] for i in picked], sims, depth))
        return rankings
