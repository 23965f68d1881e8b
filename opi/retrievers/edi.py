"""EDI retriever: Euclidean distance between bag-of-words count vectors (scikit-learn); the nearest chunk wins.

Unlike cosine, the distance grows with a chunk's length, so a short chunk that shares the question's words
beats a long one that shares them too. Tokens as TF-IDF's (``opi.retrievers.tokens``); chunks with no word at all
score 0 for every question. Distances come from scikit-learn's ``euclidean_distances`` on sparse counts (norms and
dot products), a block of chunks at a time with a running top k, each distinct chunk text once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from opi.retrievers.base import Ranking, Retriever
from opi.retrievers.lexical import sparse_top
from opi.retrievers.tokens import analyzer, chunk_matrix
from opi.retrievers.topk import DistinctTexts


@dataclass
class EDIRetriever(Retriever):
    embeds: ClassVar[bool] = False
    name: str = "EDI"

    def rank(self, questions, chunks, depth):
        from sklearn.feature_extraction.text import CountVectorizer
        from sklearn.metrics.pairwise import euclidean_distances

        distinct = DistinctTexts.of([c.text for c in chunks])
        vectorizer = CountVectorizer(analyzer=analyzer(CountVectorizer()))
        matrix = chunk_matrix(vectorizer, distinct.texts)
        if matrix is None:
            return [Ranking.from_scores(np.zeros(len(chunks)), depth) for _ in questions]
        asked = vectorizer.transform(questions)
        # the nearest chunk first
        return sparse_top(lambda start, stop: -euclidean_distances(asked, matrix[start:stop]), len(questions),
                          distinct, depth)
