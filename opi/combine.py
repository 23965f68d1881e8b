"""Combinations of retrievers, as pure functions over rankings and sentence ids.

- A- (algorithmic): weighted reciprocal-rank fusion, the rule of LangChain's ``EnsembleRetriever``:
  score(chunk) = sum over members of weight / (rank + c), rank from 1, c = 60. LangChain returns every fused
  chunk; the paper's combinations return the default 4, so the fused list is cut to ``k`` (``None`` = no cut).
- S- (sentence): the union of the complete sentences each member retrieved with its own top-k, de-duplicated,
  in article order.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from opi.retrievers.base import Ranking

NAMED_SETS = {
    "seven": ["knn", "dps", "bm25", "svm", "tfidf", "mmr", "edi"],
    "four": ["knn", "dps", "tfidf", "mmr"],
    "two": ["knn", "dps"],
}


def reciprocal_rank_fusion(rankings: Sequence[Ranking], weights: Sequence[float] | None = None, c: float = 60,
                           k: int | None = 4) -> Ranking:
    """Fuse member rankings; ties keep the order in which chunks first appear across members (as LangChain)."""
    if not rankings:
        raise ValueError("reciprocal_rank_fusion needs at least one ranking")
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[int, float] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, chunk_id in enumerate(ranking.chunk_ids, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + weight / (rank + c)
    fused = sorted(scores.items(), key=lambda item: -item[1])  # sorted() is stable: first appearance breaks ties
    return Ranking(tuple(i for i, _ in fused), tuple(s for _, s in fused)).top(k)


def sentence_union(sentence_id_groups: Iterable[Iterable[int]]) -> list[int]:
    """Union of the members' sentence ids, duplicates removed, in article order."""
    return sorted({i for group in sentence_id_groups for i in group})
