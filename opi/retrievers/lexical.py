"""Word-based retrievers: BM25 (rank-bm25's Okapi BM25) and TF-IDF (scikit-learn, cosine).

BM25 reproduces LangChain's ``BM25Retriever`` with its defaults: tokens are whitespace-separated strings, case and
punctuation kept ("enzootic?" does not match "enzootic"), rank-bm25's ``BM25Okapi`` scores computed by an inverted
index (``opi.retrievers.bm25``), and the top k in rank-bm25's ``get_top_n`` order (which LangChain calls), ties
included.
``tokenizer=words`` lower-cases and keeps letters and digits instead, so punctuation and capitals no longer hide a
match: a better retriever than the paper's, but not the one it measured. Text in scripts written without spaces
(Chinese, Japanese, Thai) is tokenised into character bigrams (``opi.retrievers.tokens``). Chunks with no tokens at
all (punctuation only) score 0 for every question: the ranking is then the article's order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from opi.chunking import Chunk
from opi.retrievers.base import Ranking, Retriever
from opi.retrievers.bm25 import BM25Index, top_n
from opi.retrievers.tokens import TOKENIZERS, analyzer, chunk_matrix
from opi.retrievers.topk import DistinctTexts, block_length, stop_if_exiting, top_k
from opi.checks import require_number


@dataclass
class BM25Retriever(Retriever):
    embeds: ClassVar[bool] = False
    name: str = "BM25"
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25
    tokenizer: str = "whitespace"  # whitespace (LangChain's default) | words (lower-cased letters and digits)

    def __post_init__(self):
        super().__post_init__()
        require_number("k1", self.k1, ge=0)
        require_number("b", self.b, ge=0, le=1)
        require_number("epsilon", self.epsilon, ge=0)
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {sorted(TOKENIZERS)}, got {self.tokenizer!r}")

    def rank(self, questions, chunks: list[Chunk], depth):
        tokens = TOKENIZERS[self.tokenizer]
        distinct = DistinctTexts.of([c.text for c in chunks])
        index = BM25Index(map(tokens, distinct.texts), distinct.counts, self.k1, self.b, self.epsilon)
        if not index.vocabulary:  # no chunk has a token (punctuation only): every score 0, the article's order
            return [Ranking.from_scores(np.zeros(len(chunks)), depth) for _ in questions]
        rankings = []
        for question in questions:
            stop_if_exiting()
            scores = index.scores(tokens(question), np.zeros(len(distinct)))[distinct.inverse]
            rankings.append(Ranking.from_order(top_n(scores, depth), scores, depth))
        return rankings


def sparse_top(score_block, questions: int, distinct: DistinctTexts, depth: int) -> list[Ranking]:
    """Rankings from ``score_block(start, stop)``, the questions' dense scores of distinct texts ``start:stop``."""
    rows, values = top_k(score_block, questions, len(distinct), depth, block_length(questions))
    return distinct.rankings(rows, values, depth)


@dataclass
class TFIDFRetriever(Retriever):
    embeds: ClassVar[bool] = False
    name: str = "TF-IDF"

    def rank(self, questions, chunks: list[Chunk], depth):
        from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer, TfidfVectorizer
        from sklearn.metrics.pairwise import cosine_similarity

        distinct = DistinctTexts.of([c.text for c in chunks])
        vectorizer = CountVectorizer(analyzer=analyzer(TfidfVectorizer()), dtype=np.float64)
        counts = chunk_matrix(vectorizer, distinct.texts)
        if counts is None:
            return [Ranking.from_scores(np.zeros(len(chunks)), depth) for _ in questions]
        # TfidfVectorizer's own steps, its idf counting every chunk (repeated texts too): fitted on the rows of all
        transformer = TfidfTransformer().fit(counts[distinct.inverse] if distinct.repeats else counts)
        matrix, asked = transformer.transform(counts), transformer.transform(vectorizer.transform(questions))
        return sparse_top(lambda start, stop: cosine_similarity(asked, matrix[start:stop]), len(questions),
                          distinct, depth)
