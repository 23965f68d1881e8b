"""What one example's trace shows, as plain data (no MLflow here): the chunks handed on (text, chunk id, article id,
score, rank, the retriever that found them), the complete sentences the reader saw, the reader's call (prompt,
cached, tokens) and the classifier's raw reply. Kept with a configuration's result, so a run read whole from the
cache gets its traces too; ``flows.tracking.traces`` turns them into spans.

Which examples get a trace (``tracking.traces=N``) is ``traced_ids``: a sample stratified by relation, drawn by a
hash of each example id, so every configuration of a sweep traces the same examples and comparisons pair."""
from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from opi.articles import Article
from opi.chunking import document_id
from opi.combine import Retrieved
from opi.retrievers.base import Ranking

if TYPE_CHECKING:
    from opi.data import Example


def chunk_sources(retrieved: Retrieved, own: Ranking | None, member_cuts: Sequence[Ranking],
                  member_names: Sequence[str], name: str) -> list[tuple[float, str]]:
    """(score, retriever) of each chunk handed on: from the configuration's own ranking where it has one (single,
    A-), else from the first member whose top k holds it (S-, each score on its member's scale)."""
    if own is not None:
        scores = dict(zip(own.chunk_ids, own.scores))
        return [(scores[i], name) for i in retrieved.chunk_ids]
    found: dict[int, tuple[float, str]] = {}
    for ranking, member in zip(member_cuts, member_names):
        for i, score in zip(ranking.chunk_ids, ranking.scores):
            found.setdefault(i, (score, member))
    return [found[i] for i in retrieved.chunk_ids]


def trace_records(examples: Sequence[Example], retrieved: Mapping[str, Retrieved],
                  sources: Mapping[str, list[tuple[float, str]]], articles: Mapping[str, Article],
                  texts: Sequence[list[str]], reader_calls: Sequence[dict] | None,
                  classifier_replies: Sequence[str | None] | None) -> dict[str, dict[str, Any]]:
    """Per example id: its ``documents`` (in the order handed on, rank from 1), ``sentences``, gold ``evidence``,
    ``reader`` call (None for a reader without one) and ``classifier_reply`` (None for a classifier that does not
    ask an LLM)."""
    records = {}
    for i, example in enumerate(examples):
        chunks = articles[document_id(example.context)].chunks
        documents = [{"chunk_id": int(c), "article_id": chunks[c].doc_id, "text": chunks[c].text,
                      "score": float(score), "rank": rank, "retriever": source}
                     for rank, (c, (score, source)) in enumerate(zip(retrieved[example.id].chunk_ids,
                                                                     sources[example.id]), start=1)]
        records[example.id] = {"documents": documents, "sentences": list(texts[i]),
                               "evidence": list(example.evidence),
                               "reader": reader_calls[i] if reader_calls is not None else None,
                               "classifier_reply": classifier_replies[i] if classifier_replies is not None else None}
    return records


def _draw_order(seed: int, example_id: str) -> str:
    return hashlib.sha256(f"{seed}:{example_id}".encode()).hexdigest()


def traced_ids(ids: Sequence[str], relations: Sequence[str | None], n: int | None, seed: int = 0) -> list[str]:
    """The example ids to trace: all (``n`` None), or ``n`` drawn within relations (rows without one are a stratum
    of their own), each stratum given its share of ``n`` by size, at least one while ``n`` allows (largest
    remainders first), examples in a stratum taken in the order of a hash of (seed, id). Returned in data order."""
    if n is None or n >= len(ids):
        return list(ids)
    strata: dict[str | None, list[str]] = defaultdict(list)
    for example_id, relation in zip(ids, relations):
        strata[relation].append(example_id)
    names = sorted(strata, key=lambda r: (r is None, str(r)))
    quota = {r: 0 for r in names}
    if n >= len(names):
        quota = {r: 1 for r in names}
    left = n - sum(quota.values())
    shares = {r: left * len(strata[r]) / len(ids) for r in names}
    for r in names:
        quota[r] += min(int(shares[r]), len(strata[r]) - quota[r])
    by_remainder = sorted(names, key=lambda r: (-(shares[r] - int(shares[r])), -len(strata[r]), str(r)))
    while sum(quota.values()) < n:
        for r in by_remainder:
            if sum(quota.values()) < n and quota[r] < len(strata[r]):
                quota[r] += 1
    chosen = {i for r in names for i in sorted(strata[r], key=lambda i: _draw_order(seed, i))[:quota[r]]}
    return [i for i in ids if i in chosen]
