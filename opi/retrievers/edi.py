"""EDI retriever: Euclidean distance between bag-of-words count vectors (scikit-learn); the nearest chunk wins.

Unlike cosine, the distance grows with a chunk's length, so a short chunk that shares the question's words
beats a long one that shares them too.
"""
from __future__ import annotations

from dataclasses import dataclass

from opi.retrievers.base import Retriever


@dataclass
class EDIRetriever(Retriever):
    name: str = "EDI"

    def score(self, questions, chunks):
        from sklearn.feature_extraction.text import CountVectorizer
        from sklearn.metrics.pairwise import euclidean_distances

        vectorizer = CountVectorizer()
        matrix = vectorizer.fit_transform([c.text for c in chunks])
        distances = euclidean_distances(vectorizer.transform(questions), matrix)
        return -distances  # the nearest chunk first
