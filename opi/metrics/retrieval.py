"""Rank-aware retrieval metrics against the gold evidence: recall@k, nDCG@k and MRR per example.

A chunk is relevant to an example when it holds at least one of the example's gold evidence pieces whole (word
tokens, as ``opi.diagnostics`` matches them) and belongs to the example's own article (in corpus-wide retrieval
another article can hold the same words, which is no evidence for this question). An example without evidence, or
whose evidence no chunk holds whole (a piece across a chunk boundary, or longer than any chunk), has no relevant
chunk: every metric of it is missing (None), never 0. Evidence longer than every chunk (SQuAD's gold paragraphs)
can never be held whole: such examples are marked in ``evidence_longer_than_chunk`` (1.0), which the run counts
and says. ``metrics.evidence_match=sentence`` (``EVIDENCE_MATCHES``) counts instead a chunk that holds a whole
sentence of the evidence: the sentences that hold the gold answer, where any does, else any of its sentences.

- ``recall_at_<k>``: relevant chunks in the top k / all relevant chunks of the index (BEIR's definition);
- ``ndcg_at_<k>``: binary gains, the ideal DCG over all relevant chunks of the index (scikit-learn's
  ``ndcg_score``);
- ``mrr``: 1 / rank of the first relevant chunk, 0 when none is within the ranking's depth.
A k deeper than a ranking uses what is there. An unordered combination (S-: a union of its members' sentences)
has no rank order: only recall, over the union of its members' top k.
(MLflow metric names cannot hold '@', hence ``recall_at_4``.)
"""
from __future__ import annotations

from functools import lru_cache
from typing import AbstractSet, Mapping, Sequence

from opi.articles import Article
from opi.chunking import document_id
from opi.data import Example
from opi.diagnostics import normalized
from opi.retrievers.base import Ranking

EVIDENCE_MATCHES = ("whole", "sentence")  # what of the evidence a relevant chunk holds (metrics.evidence_match)
TOO_LONG = "evidence_longer_than_chunk"  # the column marking examples whose evidence no chunk can hold whole


def evidence_pieces(example: Example, match: str = "whole") -> list[str]:
    """What a relevant chunk must hold one of, normalized: the evidence pieces (``whole``), or their sentences
    (``sentence``: those holding the gold answer, where any does, else every one)."""
    if match not in EVIDENCE_MATCHES:
        raise ValueError(f"evidence_match must be one of {EVIDENCE_MATCHES}, got {match!r}")
    pieces = [normalized(piece) for piece in example.evidence]
    pieces = [piece for piece in pieces if piece.strip()]  # a piece without words would match anything
    if match == "whole" or not pieces:
        return pieces
    from opi.sentences import split_sentences

    sentences = [normalized(s.text) for piece in example.evidence for s in split_sentences(piece)]
    sentences = [s for s in sentences if s.strip()]
    answer = normalized(example.answer)
    holding = [s for s in sentences if answer.strip() and answer in s]
    return holding or sentences


def relevant_chunks(example: Example, article: Article, match: str = "whole") -> frozenset[int]:
    """Ids of the chunks of ``article`` (one article or the corpus view) that hold a gold evidence piece of the
    example (``match``: whole, or a sentence of it) and come from its own article; empty when there are none."""
    pieces = evidence_pieces(example, match)
    if not pieces:
        return frozenset()
    own = document_id(example.context)
    return frozenset(i for i, chunk in enumerate(article.chunks)
                     if chunk.doc_id == own and any(piece in normalized(chunk.text) for piece in pieces))


def longer_than_chunks(example: Example, article: Article) -> bool:
    """Whether every evidence piece of the example has more words than any chunk of its own article: no chunk can
    hold one whole. False when the article has no chunk at all (a vector store holding none of its text)."""
    pieces = evidence_pieces(example)
    own = document_id(example.context)
    lengths = [len(normalized(c.text).split()) for c in article.chunks if c.doc_id == own]
    return bool(pieces and lengths) and all(len(piece.split()) > max(lengths) for piece in pieces)


def recall_at(rankings: Sequence[Ranking], relevant: AbstractSet[int], k: int) -> float:
    """Share of the relevant chunks in the top ``k`` of any of ``rankings`` (one ranking, or an S- union's
    members)."""
    found = {i for ranking in rankings for i in ranking.chunk_ids[:k]}
    return len(found & relevant) / len(relevant)


def ndcg_at(ranking: Ranking, relevant: AbstractSet[int], n_chunks: int, k: int) -> float:
    """nDCG@k with binary gains over all ``n_chunks`` chunks of the index, ideal DCG over every relevant chunk.

    scikit-learn averages the gains of tied scores, so chunks the ranking leaves out (tied, below every ranked
    chunk) would earn part credit when ``k`` is deeper than the ranking. Placeholders of gain 0 between the ranked
    and the unranked chunks fill the ranks the ranking does not reach, as a shorter run is scored by trec_eval."""
    gains = [int(i in relevant) for i in ranking.chunk_ids]
    return _ndcg(n_chunks, k, len(gains), tuple(gains[:k]), len(relevant))


@lru_cache(maxsize=1 << 16)
def _ndcg(n_chunks: int, k: int, depth: int, top_gains: tuple[int, ...], n_relevant: int) -> float:
    """scikit-learn's nDCG@k of a ranking ``depth`` deep whose top k have ``top_gains``, among ``n_chunks`` of which
    ``n_relevant`` are relevant: all its value depends on, to the last bit (below rank k the discount is 0, and the
    unranked chunks are one tie whose gains it averages), so a sweep meeting the same few patterns thousands of
    times computes each once (a call costs ~0.3 ms of input checks)."""
    from sklearn.metrics import ndcg_score

    rest = n_relevant - sum(top_gains)  # relevant chunks below rank k: ranked ones first, then unranked
    ranked_below = min(rest, depth - len(top_gains))
    gains = [*top_gains, *[1] * ranked_below, *[0] * (depth - len(top_gains) - ranked_below)]
    unranked_relevant = rest - ranked_below
    padding = max(k - depth, 1)
    y_true = [*gains, *[1] * unranked_relevant, *[0] * (n_chunks - depth - unranked_relevant), *[0] * padding]
    y_score = [*(float(depth - rank) for rank in range(depth)), *[0.0] * (n_chunks - depth), *[0.5] * padding]
    return float(ndcg_score([y_true], [y_score], k=k))  # 1..depth above the placeholders' 0.5, the unranked's 0


def mrr(ranking: Ranking, relevant: AbstractSet[int]) -> float:
    return next((1.0 / (rank + 1) for rank, i in enumerate(ranking.chunk_ids) if i in relevant), 0.0)


def column_names(ks: Sequence[int], ordered: bool = True) -> list[str]:
    ks = list(dict.fromkeys(ks))
    recall = [f"recall_at_{k}" for k in ks]
    return [*recall, *[f"ndcg_at_{k}" for k in ks], "mrr"] if ordered else recall


def example_metrics(rankings: Sequence[Ranking], relevant: AbstractSet[int], n_chunks: int, ks: Sequence[int],
                    ordered: bool = True) -> dict[str, float | None]:
    """One example's metrics (all None without a relevant chunk)."""
    names = column_names(ks, ordered)
    if not relevant:
        return dict.fromkeys(names)
    values = {f"recall_at_{k}": recall_at(rankings, relevant, k) for k in ks}
    if ordered:
        (ranking,) = rankings
        values.update({f"ndcg_at_{k}": ndcg_at(ranking, relevant, n_chunks, k) for k in ks})
        values["mrr"] = mrr(ranking, relevant)
    return {name: values[name] for name in names}


def retrieval_columns(examples: Sequence[Example], rankings: Mapping[str, Sequence[Ranking]],
                      articles: Mapping[str, Article], ks: Sequence[int], ordered: bool = True,
                      evidence_match: str = "whole") -> dict[str, list[float | None]]:
    """Per-example columns, in the order of ``examples``. ``rankings``: example id -> ONE deep ranking for a single
    retriever or an A- fusion (``ordered``), or the member rankings of an S- union (``ordered=False``: recall
    only). Where some example has no relevant chunk because its evidence is longer than every chunk, the column
    ``evidence_longer_than_chunk`` too (1.0 there, None elsewhere)."""
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"retrieval metrics need cut-offs k >= 1, got {list(ks)}")
    columns: dict[str, list[float | None]] = {name: [] for name in column_names(ks, ordered)}
    too_long: list[float | None] = []
    for example in examples:
        of_example = rankings[example.id]
        if ordered and len(of_example) != 1:
            raise ValueError(f"an ordered configuration has one ranking per example, {example.id} has "
                             f"{len(of_example)}")
        article = articles[document_id(example.context)]
        relevant = relevant_chunks(example, article, evidence_match)
        values = example_metrics(of_example, relevant, len(article.chunks), ks, ordered)
        for name, value in values.items():
            columns[name].append(value)
        too_long.append(1.0 if not relevant and longer_than_chunks(example, article) else None)
    if any(value is not None for value in too_long):
        columns[TOO_LONG] = too_long
    return columns
