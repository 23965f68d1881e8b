"""Retrieval for a set of examples: member rankings (to a depth), cut to each member's ``k``, through the
combination's rule, mapped to the complete sentences handed to the reader."""
from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Mapping, Sequence

from opi.articles import Article
from opi.chunking import document_id
from opi.combine import Retrieved, sentence_union
from opi.retrievers.base import Ranking, Retriever

if TYPE_CHECKING:
    from opi.data import Example


def rank_examples(retriever: Retriever, examples: Sequence[Example], articles: Mapping[str, Article], depth: int
                  ) -> dict[str, Ranking]:
    """One ranking of up to ``depth`` chunks per example, batching the questions that share an index (an
    article, or the corpus)."""
    by_index, indexes = indexes_of(examples, articles)
    retriever.prepare([e.question for e in examples], [c for a in indexes.values() for c in a.chunks])
    rankings = {}
    for doc_id, group in by_index.items():
        for example, ranking in zip(group, retriever.rank_examples(group, list(indexes[doc_id].chunks), depth)):
            rankings[example.id] = ranking
    return rankings


def indexes_of(examples: Sequence[Example], articles: Mapping[str, Article]
               ) -> tuple[dict[str, list[Example]], dict[str, Article]]:
    """The examples grouped by the index their questions are asked against, and those indexes by their own id: one
    per article, or the corpus once. A retriever prepares the examples' questions and these indexes' chunks."""
    by_index: dict[str, list[Example]] = defaultdict(list)
    indexes: dict[str, Article] = {}
    for example in examples:
        article = articles[document_id(example.context)]
        by_index[article.doc_id].append(example)
        indexes[article.doc_id] = article
    return by_index, indexes


def cut(rankings: Mapping[str, Ranking], k: int) -> dict[str, Ranking]:
    """Every ranking cut to its first ``k`` chunks (a member's own ``k``)."""
    return {example_id: ranking.top(k) for example_id, ranking in rankings.items()}


def combine(combination, member_rankings: Sequence[Mapping[str, Ranking]], examples: Sequence[Example],
            articles: Mapping[str, Article]) -> dict[str, Retrieved]:
    """Each example's member rankings (already cut to the members' ``k``) through the combination's rule
    (``opi.combine``)."""
    retrieved = {}
    for example in examples:
        article = articles[document_id(example.context)]

        def sentences_of(chunk_ids, article=article):
            return sentence_union(article.chunks[i].sentence_ids for i in chunk_ids)

        retrieved[example.id] = combination.combine([member[example.id] for member in member_rankings],
                                                    sentences_of)
    return retrieved


def evaluated_rankings(combination, deep: Sequence[Mapping[str, Ranking]], cut_: Sequence[Mapping[str, Ranking]],
                       examples: Sequence[Example]) -> tuple[dict[str, list[Ranking]], bool]:
    """What the rank-aware retrieval metrics read, per example, and whether it is ordered: the configuration's own
    ranking (``combination.ranking``), or, for one without an order (S-, or a combination of your own without
    ``ranking``), the members' rankings."""
    ranking_of = getattr(combination, "ranking", None)
    own = {e.id: ranking_of([m[e.id] for m in deep], [m[e.id] for m in cut_]) if ranking_of else None
           for e in examples}
    if all(ranking is not None for ranking in own.values()):
        return {example_id: [ranking] for example_id, ranking in own.items()}, True
    return {e.id: [m[e.id] for m in deep] for e in examples}, False


def sentence_texts(example: Example, articles: Mapping[str, Article], retrieved: Retrieved) -> list[str]:
    article = articles[document_id(example.context)]
    return [article.sentences[i].text for i in retrieved.sentence_ids]


def right_article(example: Example, articles: Mapping[str, Article], retrieved: Retrieved) -> float:
    """Share of the retrieved chunks that come from the example's own article (1.0 within one article)."""
    own, chunks = document_id(example.context), articles[document_id(example.context)].chunks
    return sum(chunks[i].doc_id == own for i in retrieved.chunk_ids) / max(len(retrieved.chunk_ids), 1)
