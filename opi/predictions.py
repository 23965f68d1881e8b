"""One configuration's per-example rows (``predictions.parquet``): what was retrieved (with its diagnostics),
answered and classified, and the answer similarity. Every metric and the report are computed from these rows.

The diagnostics (``opi.diagnostics``) read the complete sentences handed to the reader; ``answer_in_chunks`` reads
the retrieved chunks themselves (a chunk's fragment widened to its sentences can hold an answer the chunk does
not). In corpus-wide retrieval both read only what came from the example's own article: an answer or an evidence
sentence that another article happens to hold too is not evidence for this question.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Mapping, Sequence

import pandas as pd

from opi.articles import Article
from opi.chunking import document_id
from opi.combine import Retrieved
from opi.data import Example
from opi.diagnostics import COLUMNS as DIAGNOSTIC_COLUMNS, answer_found, content_words, diagnose
from opi.retrieval import right_article


def own_sentences(example: Example, article: Article, retrieved: Retrieved) -> list[str]:
    """The retrieved sentences that belong to the example's own article (all of them, within one article)."""
    own = document_id(example.context)
    if article.doc_id == own:
        return [article.sentences[i].text for i in retrieved.sentence_ids]
    mine = {i for chunk in article.chunks if chunk.doc_id == own for i in chunk.sentence_ids}
    return [article.sentences[i].text for i in retrieved.sentence_ids if i in mine]


def own_chunks(example: Example, article: Article, retrieved: Retrieved) -> list[str]:
    own = document_id(example.context)
    return [article.chunks[i].text for i in retrieved.chunk_ids if article.chunks[i].doc_id == own]


EXCERPT_WORDS = 150
_words = lru_cache(maxsize=8192)(content_words)  # an article's sentences, read again for each of its questions


def article_excerpt(example: Example, article: Article, words: int = EXCERPT_WORDS) -> str:
    """What a person labelling an answer reads of the article: its (up to) four sentences that share most content
    words with the question, in article order, cut to ``words`` words (no gold answer or evidence in it)."""
    own = document_id(example.context)
    sentences = article.sentences if article.doc_id == own else [
        article.sentences[i] for i in sorted({i for c in article.chunks if c.doc_id == own for i in c.sentence_ids})]
    wanted = content_words(example.question)
    best = sorted(sentences, key=lambda s: -len(_words(s.text) & wanted))[:4]
    text = " ".join(s.text for s in sorted(best, key=lambda s: s.idx)).split()
    return " ".join(text[:words]) + (" ..." if len(text) > words else "")


def prediction_rows(examples: Sequence[Example], retrieved: Mapping[str, Retrieved], texts: Sequence[list[str]],
                    answers: Sequence[str | None], predicted: Sequence[str | None], similarities: Sequence[float],
                    articles: Mapping[str, Article], corpus: bool = False) -> pd.DataFrame:
    """One row per example. ``corpus``: retrieval was corpus-wide (``articles`` is the corpus view): the rows also
    get the share of chunks from the right article."""
    seen = [own_sentences(e, articles[document_id(e.context)], retrieved[e.id]) for e in examples]
    diagnostics = pd.DataFrame([diagnose(e.answer, e.evidence, s) for e, s in zip(examples, seen)],
                               columns=list(DIAGNOSTIC_COLUMNS))
    rows = pd.DataFrame({
        "id": [e.id for e in examples],
        "question": [e.question for e in examples],
        "answer": [e.answer for e in examples],
        "relation": [e.relation for e in examples],
        "cluster": [e.cluster for e in examples],  # the report's unit of inference (opi.metrics.stats)
        "chunk_ids": [list(retrieved[e.id].chunk_ids) for e in examples],
        "sentence_ids": [list(retrieved[e.id].sentence_ids) for e in examples],
        "sentences": [list(t) for t in texts],  # the complete sentences handed to the reader
        "article_excerpt": [article_excerpt(e, articles[document_id(e.context)]) for e in examples],
        "retrieved_sentences": [len(t) for t in texts],
        "retrieved_words": [sum(len(s.split()) for s in t) for t in texts],
        "generated_answer": list(answers),
        "predicted_relation": list(predicted),
        "similarity": [float(s) for s in similarities],
    })
    for column in diagnostics:
        rows[column] = pd.array(diagnostics[column], dtype="Float64")  # no evidence stays missing
    rows["answer_in_chunks"] = [float(answer_found(e.answer, own_chunks(e, articles[document_id(e.context)],
                                                                         retrieved[e.id]))) for e in examples]
    if corpus:
        rows["right_article"] = [right_article(e, articles, retrieved[e.id]) for e in examples]
    sources = [[articles[document_id(e.context)].chunks[i].source for i in retrieved[e.id].chunk_ids]
               for e in examples]
    if any(source is not None for found in sources for source in found):
        rows["store_ids"] = sources  # the vector store's own ids of the chunks (retriever=vectorstore)
    return rows


def with_scores(rows: pd.DataFrame, columns: Mapping[str, list]) -> pd.DataFrame:
    """``rows`` with per-example answer scores added; a missing score (an unparsable LLM reply) stays missing."""
    rows = rows.copy()
    for column, values in columns.items():
        rows[column] = pd.array(values, dtype="Float64")
    return rows
