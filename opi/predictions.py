"""One configuration's per-example rows (``predictions.parquet``): what was retrieved (with its diagnostics),
answered and classified, and the answer similarity. Every metric and the report are computed from these rows."""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from opi.articles import Article
from opi.combine import Retrieved
from opi.data import Example
from opi.diagnostics import COLUMNS as DIAGNOSTIC_COLUMNS, diagnose
from opi.retrieval import right_article


def prediction_rows(examples: Sequence[Example], retrieved: Mapping[str, Retrieved], texts: Sequence[list[str]],
                    answers: Sequence[str], predicted: Sequence[str | None], similarities: Sequence[float],
                    articles: Mapping[str, Article] | None = None) -> pd.DataFrame:
    """One row per example. With ``articles`` of a corpus-wide retrieval, also the share of chunks from the right
    article."""
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


def with_scores(rows: pd.DataFrame, columns: Mapping[str, list]) -> pd.DataFrame:
    """``rows`` with per-example answer scores added; a missing score (an unparsable LLM reply) stays missing."""
    rows = rows.copy()
    for column, values in columns.items():
        rows[column] = pd.array(values, dtype="Float64")
    return rows
