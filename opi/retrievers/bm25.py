"""Okapi BM25 by an inverted index: rank-bm25's ``BM25Okapi`` scores (LangChain's ``BM25Retriever``), bit for bit.

rank-bm25 scores a query by looping, in Python, over every document for each query word (350 ms a question over
52k chunks); here each word's postings (the distinct texts holding it, and its weight in each) are precomputed once,
and a question's scores are the sum of its words' postings, added in the question's word order as rank-bm25 adds
them. Every float operation is rank-bm25's, in its order (the idf sum in its dictionary order, the length norm
``k1 * (1 - b + b * len / avgdl)``, ``idf * (tf * (k1 + 1) / (tf + norm))``), so the scores are equal, not close.

Corpus statistics (document count, document frequencies, mean length) count every chunk, repeated texts
included, as rank-bm25 does; scores are computed once per distinct text (``DistinctTexts``). The top k come in
``get_top_n``'s order, ties included (``top_n``).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import numpy as np



class BM25Index:
    def __init__(self, documents: Sequence[list[str]], counts: Sequence[int], k1: float, b: float, epsilon: float):
        """``documents``: the distinct texts' tokens; ``counts``: how many chunks have each."""
        vocabulary: dict[str, int] = {}  # in rank-bm25's order: first document holding a word, then word order
        postings: list[list[tuple[int, int]]] = []  # per word: (distinct text, term frequency)
        document_frequency: list[int] = []
        for position, (tokens, count) in enumerate(zip(documents, counts)):
            for word, tf in Counter(tokens).items():
                column = vocabulary.setdefault(word, len(vocabulary))
                if column == len(postings):
                    postings.append([])
                    document_frequency.append(0)
                postings[column].append((position, tf))
                document_frequency[column] += count
        size = int(np.sum(counts))
        lengths = np.array([len(tokens) for tokens in documents])
        average_length = int(np.dot(lengths, counts)) / size
        idf = [math.log(size - df + 0.5) - math.log(df + 0.5) for df in document_frequency]
        floor = epsilon * (sum(idf) / len(idf)) if idf else 0.0  # rank-bm25's average: a left-to-right sum
        self.idf = np.array([floor if value < 0 else value for value in idf])
        self.vocabulary = vocabulary
        self.size = len(documents)
        norm = k1 * (1 - b + b * lengths / average_length)
        self.postings, self.weights = [], []
        for entries in postings:
            rows, tf = np.array(entries, dtype=np.int64).T
            self.postings.append(rows)
            self.weights.append(tf * (k1 + 1) / (tf + norm[rows]))

    def scores(self, query: list[str], out: np.ndarray) -> np.ndarray:
        """The query's score of every distinct text, added into ``out`` (zeros)."""
        for word in query:
            column = self.vocabulary.get(word)
            if column is not None:
                out[self.postings[column]] += self.idf[column] * self.weights[column]
        return out



def top_n(scores: np.ndarray, depth: int) -> np.ndarray:
    """rank-bm25's ``get_top_n`` order, ``np.argsort(scores)[::-1][:depth]``, without sorting every score where
    the first ``depth`` are strictly ordered and strictly above the rest (then any sort agrees); a full sort
    settles ties as rank-bm25's does."""
    if depth < len(scores):
        candidates = np.argpartition(-scores, depth)[:depth + 1]
        values = scores[candidates]
        order = np.argsort(-values)
        if np.all(np.diff(values[order]) < 0):
            return candidates[order[:depth]]
    return np.argsort(scores)[::-1][:depth]
