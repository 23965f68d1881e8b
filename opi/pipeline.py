"""The evaluation stages as plain functions over plain data; ``flows/`` wraps them in cached Prefect tasks.

    examples -> articles (sentences + chunks) -> member rankings -> combination -> retrieved sentences
             -> answers -> predicted relations -> per-example rows -> metrics
"""
from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from opi.chunking import Chunk, chunk_article, document_id
from opi.combine import Retrieved, sentence_union
from opi.data import Example
from opi.diagnostics import COLUMNS as DIAGNOSTIC_COLUMNS, diagnose
from opi.retrievers import Ranking, Retriever
from opi.sentences import Sentence, split_sentences


@dataclass(frozen=True)
class Article:
    doc_id: str
    sentences: tuple[Sentence, ...]
    chunks: tuple[Chunk, ...]


def prepare_articles(contexts: Sequence[str], size: int = 100, overlap: int = 20) -> dict[str, Article]:
    """Segment and chunk each distinct article once."""
    articles = {}
    for context in dict.fromkeys(contexts):
        sentences = split_sentences(context)
        articles[document_id(context)] = Article(document_id(context), tuple(sentences),
                                                 tuple(chunk_article(context, sentences, size, overlap)))
    return articles


def corpus_view(articles: dict[str, Article]) -> dict[str, Article]:
    """Retrieval over the whole corpus: every article id maps to one merged article whose chunks and sentences are
    all articles', renumbered (each chunk keeps its own article's ``doc_id``), so that the retrievers index them
    once and the combinations map chunks back to complete sentences as usual."""
    sentences: list[Sentence] = []
    chunks: list[Chunk] = []
    for article in articles.values():
        offset = len(sentences)
        sentences += [dataclasses.replace(s, idx=s.idx + offset) for s in article.sentences]
        chunks += [dataclasses.replace(c, idx=len(chunks) + i, sentence_ids=tuple(j + offset for j in c.sentence_ids))
                   for i, c in enumerate(article.chunks)]
    corpus_id = "corpus-" + hashlib.sha256(" ".join(articles).encode()).hexdigest()[:16]
    corpus = Article(corpus_id, tuple(sentences), tuple(chunks))
    return {doc_id: corpus for doc_id in articles}


def rank_examples(retriever: Retriever, examples: Sequence[Example], articles: dict[str, Article]
                  ) -> dict[str, Ranking]:
    """One ranking per example, batching the questions that share an index (an article, or the corpus)."""
    by_index: dict[str, list[Example]] = defaultdict(list)
    indexes: dict[str, Article] = {}  # by the index's own id: one per article, or the corpus once
    for example in examples:
        article = articles[document_id(example.context)]
        by_index[article.doc_id].append(example)
        indexes[article.doc_id] = article
    retriever.prepare([e.question for e in examples], [c for a in indexes.values() for c in a.chunks])
    rankings = {}
    for doc_id, group in by_index.items():
        for example, ranking in zip(group, retriever.rank_examples(group, list(indexes[doc_id].chunks))):
            rankings[example.id] = ranking
    return rankings


def combine(combination, member_rankings: Sequence[dict[str, Ranking]], examples: Sequence[Example],
            articles: dict[str, Article]) -> dict[str, Retrieved]:
    """Each example's member rankings through the combination's rule (``opi.combine``)."""
    retrieved = {}
    for example in examples:
        article = articles[document_id(example.context)]

        def sentences_of(chunk_ids, article=article):
            return sentence_union(article.chunks[i].sentence_ids for i in chunk_ids)

        retrieved[example.id] = combination.combine([member[example.id] for member in member_rankings],
                                                    sentences_of)
    return retrieved


def sentence_texts(example: Example, articles: dict[str, Article], retrieved: Retrieved) -> list[str]:
    article = articles[document_id(example.context)]
    return [article.sentences[i].text for i in retrieved.sentence_ids]


def right_article(example: Example, articles: dict[str, Article], retrieved: Retrieved) -> float:
    """Share of the retrieved chunks that come from the example's own article (1.0 within one article)."""
    own, chunks = document_id(example.context), articles[document_id(example.context)].chunks
    return sum(chunks[i].doc_id == own for i in retrieved.chunk_ids) / max(len(retrieved.chunk_ids), 1)


def prediction_rows(examples: Sequence[Example], retrieved: dict[str, Retrieved], texts: Sequence[list[str]],
                    answers: Sequence[str], predicted: Sequence[str | None], similarities: Sequence[float],
                    articles: dict[str, Article] | None = None) -> pd.DataFrame:
    """One row per example: what was retrieved (with its diagnostics), answered and classified, and the answer
    similarity. With ``articles`` of a corpus-wide retrieval, also the share of chunks from the right article."""
    diagnostics = pd.DataFrame([diagnose(e.answer, e.evidence, t) for e, t in zip(examples, texts)],
                               columns=list(DIAGNOSTIC_COLUMNS))
    rows = pd.DataFrame({
        "id": [e.id for e in examples],
        "question": [e.question for e in examples],
        "answer": [e.answer for e in examples],
        "relation": [e.relation for e in examples],
        "chunk_ids": [list(retrieved[e.id].chunk_ids) for e in examples],
        "sentence_ids": [list(retrieved[e.id].sentence_ids) for e in examples],
        "retrieved_sentences": [len(t) for t in texts],
        "retrieved_words": [sum(len(s.split()) for s in t) for t in texts],
        "generated_answer": list(answers),
        "predicted_relation": list(predicted),
        "similarity": [float(s) for s in similarities],
    })
    for column in diagnostics:
        rows[column] = pd.array(diagnostics[column], dtype="Float64")  # no evidence stays missing
    if articles is not None:
        rows["right_article"] = [right_article(e, articles, retrieved[e.id]) for e in examples]
    return rows


def with_scores(rows: pd.DataFrame, columns: dict[str, list]) -> pd.DataFrame:
    """``rows`` with per-example answer scores added; a missing score (an unparsable LLM reply) stays missing."""
    rows = rows.copy()
    for column, values in columns.items():
        rows[column] = pd.array(values, dtype="Float64")
    return rows
