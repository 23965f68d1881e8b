"""The evaluation stages as plain functions over plain data; ``flows/`` wraps them in cached Prefect tasks.

    examples -> articles (sentences + chunks) -> member rankings -> combination -> retrieved sentences
             -> answers -> predicted relations -> per-example rows -> metrics
"""
from __future__ import annotations

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


def rank_examples(retriever: Retriever, examples: Sequence[Example], articles: dict[str, Article]
                  ) -> dict[str, Ranking]:
    """One ranking per example, batching the questions of each article into one call."""
    by_doc: dict[str, list[Example]] = defaultdict(list)
    for example in examples:
        by_doc[document_id(example.context)].append(example)
    rankings = {}
    for doc_id, group in by_doc.items():
        for example, ranking in zip(group, retriever.rank([e.question for e in group],
                                                          list(articles[doc_id].chunks))):
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


def prediction_rows(examples: Sequence[Example], retrieved: dict[str, Retrieved], texts: Sequence[list[str]],
                    answers: Sequence[str], predicted: Sequence[str], similarities: Sequence[float]) -> pd.DataFrame:
    """One row per example: what was retrieved (with its diagnostics), answered and classified, and the answer
    similarity."""
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
    return rows


def with_scores(rows: pd.DataFrame, columns: dict[str, list]) -> pd.DataFrame:
    """``rows`` with per-example answer scores added; a missing score (an unparsable LLM reply) stays missing."""
    rows = rows.copy()
    for column, values in columns.items():
        rows[column] = pd.array(values, dtype="Float64")
    return rows
