"""Word-based retrievers: BM25 (rank-bm25's Okapi BM25) and TF-IDF (scikit-learn, cosine)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from opi.chunking import Chunk
from opi.retrievers.base import Retriever, top_k

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Lower-cased word tokens: punctuation must not glue to words ("1831." would not match "1831")."""
    return _WORD.findall(text.lower())


@dataclass
class BM25Retriever(Retriever):
    name: str = "BM25"
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25

    def __post_init__(self):
        super().__post_init__()
        if self.k1 < 0 or not 0.0 <= self.b <= 1.0:
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={self.k1}, b={self.b}")

    def rank(self, questions, chunks: list[Chunk]):
        from rank_bm25 import BM25Okapi

        index = BM25Okapi([words(c.text) for c in chunks], k1=self.k1, b=self.b, epsilon=self.epsilon)
        return [top_k(index.get_scores(words(q)), self.k) for q in questions]


@dataclass
class TFIDFRetriever(Retriever):
    name: str = "TF-IDF"

    def rank(self, questions, chunks: list[Chunk]):
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.metrics.pairwise import cosine_similarity

        vectorizer = TfidfVectorizer()
        matrix = vectorizer.fit_transform([c.text for c in chunks])
        sims = cosine_similarity(vectorizer.transform(questions), matrix)
        return [top_k(row, self.k) for row in sims]
