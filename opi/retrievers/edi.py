"""EDI retriever: Euclidean distance between bag-of-words count vectors (scikit-learn); the nearest chunk wins.

Unlike cosine, the distance grows with a chunk's length, so a short chunk that shares the question's words
beats a long one that shares them too. Tokens as TF-IDF's (``opi.retrievers.tokens``); chunks with no word at all
score 0 for every question.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opi.retrievers.base import Retriever
from opi.retrievers.tokens import analyzer, chunk_matrix


@dataclass
class EDIRetriever(Retriever):
    name: str = "EDI"

    def score(self, questions, chunks):
        from sklearn.feature_extraction.text import CountVectorizer
        from sklearn.metrics.pairwise import euclidean_distances

        vectorizer = CountVectorizer(analyzer=analyzer(CountVectorizer()))
        matrix = chunk_matrix(vectorizer, [c.text for c in chunks])
        if matrix is None:
            return np.zeros((len(questions), len(chunks)))
        distances = euclidean_distances(vectorizer.transform(questions), matrix)
        return -distances  # the nearest chunk first
