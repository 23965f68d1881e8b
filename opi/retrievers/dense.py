"""Embedding-based retrievers: DPS, kNN and MMR.

DPS (dot-product similarity) scores raw pooled embeddings, so a chunk's vector norm counts; kNN scores cosine
similarity (DPS on unit vectors); MMR (maximal marginal relevance) picks, from the ``fetch_k`` most similar chunks,
greedily by ``lambda_mult * sim(query) - (1 - lambda_mult) * max sim(already picked)`` using LangChain's own
implementation.
"""
from __future__ import annotations

import numpy as np

from opi.chunking import Chunk
from opi.retrievers.base import Ranking, Retriever, top_k


class _EmbeddingRetriever(Retriever):
    normalize = True

    def _vectors(self, questions: list[str], chunks: list[Chunk]) -> tuple[np.ndarray, np.ndarray]:
        embedder = self._require_embedder()
        return (embedder.encode(questions, normalize=self.normalize),
                embedder.encode([c.text for c in chunks], normalize=self.normalize))


class DPSRetriever(_EmbeddingRetriever):
    name = "dps"
    normalize = False

    def rank(self, questions, chunks):
        q, d = self._vectors(questions, chunks)
        return [top_k(row, self.k) for row in q @ d.T]


class KNNRetriever(_EmbeddingRetriever):
    name = "knn"

    def rank(self, questions, chunks):
        q, d = self._vectors(questions, chunks)
        return [top_k(row, self.k) for row in q @ d.T]


class MMRRetriever(_EmbeddingRetriever):
    name = "mmr"

    def __init__(self, k: int = 4, embedder=None, fetch_k: int = 20, lambda_mult: float = 0.5):
        super().__init__(k, embedder)
        if fetch_k < k:
            raise ValueError(f"MMRRetriever: fetch_k ({fetch_k}) must be >= k ({k})")
        if not 0.0 <= lambda_mult <= 1.0:
            raise ValueError(f"MMRRetriever: lambda_mult must be in [0, 1], got {lambda_mult}")
        self.fetch_k = fetch_k
        self.lambda_mult = lambda_mult

    def rank(self, questions, chunks):
        from langchain_core.vectorstores.utils import maximal_marginal_relevance

        q, d = self._vectors(questions, chunks)
        rankings = []
        for query, sims in zip(q, q @ d.T):
            candidates = top_k(sims, self.fetch_k).chunk_ids
            picked = maximal_marginal_relevance(query, d[list(candidates)], lambda_mult=self.lambda_mult, k=self.k)
            ids = tuple(candidates[i] for i in picked)
            rankings.append(Ranking(ids, tuple(float(sims[i]) for i in ids)))
        return rankings
