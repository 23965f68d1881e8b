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
from array import array
from typing import Iterable, Sequence

import numpy as np



class BM25Index:
    def __init__(self, documents: Iterable[list[str]], counts: Sequence[int], k1: float, b: float, epsilon: float):
        """``documents``: the distinct texts' tokens (read once, so a generator keeps one text's tokens in memory);
        ``counts``: how many chunks have each."""
        vocabulary: dict[str, int] = {}  # in rank-bm25's order: first document holding a word, then word order
        rows, columns, frequencies = array("q"), array("q"), array("q")  # one entry per (text, word): compact
        lengths = array("q")
        for position, tokens in enumerate(documents):
            lengths.append(len(tokens))
            for word, tf in Counter(tokens).items():
                columns.append(vocabulary.setdefault(word, len(vocabulary)))
                rows.append(position)
                frequencies.append(tf)
        self.vocabulary, self.size = vocabulary, len(lengths)
        if not vocabulary:  # no text has a token: nothing to score (the retriever ranks by position)
            return
        counts = np.asarray(counts, dtype=np.int64)
        rows, columns, tf = (np.frombuffer(a, dtype=np.int64) for a in (rows, columns, frequencies))
        lengths = np.frombuffer(lengths, dtype=np.int64)
        size = int(counts.sum())
        average_length = int(np.dot(lengths, counts)) / size
        document_frequency = np.bincount(columns, weights=counts[rows], minlength=len(vocabulary)).astype(np.int64)
        idf = [math.log(size - df + 0.5) - math.log(df + 0.5) for df in document_frequency.tolist()]
        floor = epsilon * (sum(idf) / len(idf)) if idf else 0.0  # rank-bm25's average: a left-to-right sum
        self.idf = np.array([floor if value < 0 else value for value in idf])
        norm = k1 * (1 - b + b * lengths / average_length)
        order = np.argsort(columns, kind="stable")  # postings by word, texts in order within each
        self.rows = rows[order]
        self.weights = (tf * (k1 + 1) / (tf + norm[rows]))[order]
        self.starts = np.concatenate([[0], np.cumsum(np.bincount(columns, minlength=len(vocabulary)))])

    def scores(self, query: list[str], out: np.ndarray) -> np.ndarray:
        """The query's score of every distinct text, added into ``out`` (zeros)."""
        for word in query:
            column = self.vocabulary.get(word)
            if column is not None:
                postings = slice(self.starts[column], self.starts[column + 1])
                out[self.rows[postings]] += self.idf[column] * self.weights[postings]
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
