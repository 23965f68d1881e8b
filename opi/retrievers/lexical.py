"""Word-based retrievers: BM25 (rank-bm25's Okapi BM25) and TF-IDF (scikit-learn, cosine).

BM25 reproduces LangChain's ``BM25Retriever`` with its defaults: tokens are whitespace-separated strings, case and
punctuation kept ("enzootic?" does not match "enzootic"), and the top k come in rank-bm25's ``get_top_n`` order.
``tokenizer=words`` lower-cases and keeps letters and digits instead, so punctuation and capitals no longer hide a
match: a better retriever than the paper's, but not the one it measured. Text in scripts written without spaces
(Chinese, Japanese, Thai) is tokenised into character bigrams (``opi.retrievers.tokens``). Chunks with no tokens at
all (punctuation only) score 0 for every question: the ranking is then the article's order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from opi.chunking import Chunk
from opi.retrievers.base import Ranking, Retriever
from opi.retrievers.tokens import TOKENIZERS, analyzer, chunk_matrix


@dataclass
class BM25Retriever(Retriever):
    name: str = "BM25"
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25
    tokenizer: str = "whitespace"  # whitespace (LangChain's default) | words (lower-cased letters and digits)

    def __post_init__(self):
        super().__post_init__()
        if self.k1 < 0 or not 0.0 <= self.b <= 1.0:
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={self.k1}, b={self.b}")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {sorted(TOKENIZERS)}, got {self.tokenizer!r}")

    def rank(self, questions, chunks: list[Chunk], depth):
        from rank_bm25 import BM25Okapi

        tokens = TOKENIZERS[self.tokenizer]
        corpus = [tokens(c.text) for c in chunks]
        if not any(corpus):  # no chunk has a token (punctuation only): every score 0, the article's order
            return [Ranking.from_scores(np.zeros(len(chunks)), depth) for _ in questions]
        index = BM25Okapi(corpus, k1=self.k1, b=self.b, epsilon=self.epsilon)
        rankings = []
        for question in questions:
            scores = index.get_scores(tokens(question))
            # rank_bm25's get_top_n order (which LangChain calls), ties included
            rankings.append(Ranking.from_order(np.argsort(scores)[::-1], scores, depth))
        return rankings


@dataclass
class TFIDFRetriever(Retriever):
    name: str = "TF-IDF"

    def score(self, questions, chunks: list[Chunk]):
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.metrics.pairwise import cosine_similarity

        vectorizer = TfidfVectorizer(analyzer=analyzer(TfidfVectorizer()))
        matrix = chunk_matrix(vectorizer, [c.text for c in chunks])
        if matrix is None:
            return np.zeros((len(questions), len(chunks)))
        return cosine_similarity(vectorizer.transform(questions), matrix)
