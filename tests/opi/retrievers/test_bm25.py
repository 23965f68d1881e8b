"""Okapi BM25 by an inverted index (``opi.retrievers.bm25``), in itself: a score computed by hand where a word in
most texts has a negative idf floored at epsilon times the mean idf, equal to rank-bm25's ``BM25Okapi``; a
distinct text counted as many times as chunks hold it, as if repeated; a query word asked twice added twice and an
unknown word adding nothing; no token at all, no index; and ``top_n`` in rank-bm25's ``get_top_n`` order, ties
included. The retriever built on it is checked against rank-bm25 and LangChain in
``tests/opi/retrievers/test_lexical.py``."""
import math

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from opi.retrievers.bm25 import BM25Index, top_n

K1, B, EPSILON = 1.5, 0.75, 0.25  # rank-bm25's and OPI's defaults


def index(documents, counts=None):
    return BM25Index(documents, counts or [1] * len(documents), K1, B, EPSILON)


def test_a_word_in_most_texts_has_its_idf_floored_and_the_score_is_rank_bm25s():
    documents = [["a", "b"], ["a", "c"], ["a", "d"], ["e"]]
    bm25 = index(documents)
    assert bm25.vocabulary == {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4}  # first text first, then word order
    # N = 4; "a" in 3 texts: ln(1.5 / 3.5) = -ln(7/3) < 0; b, c, d, e in one each: ln(3.5 / 1.5) = ln(7/3).
    # mean idf = (-1 + 4) ln(7/3) / 5 = 0.6 ln(7/3); "a"'s idf = epsilon * mean = 0.15 ln(7/3) = 0.1271
    rare = math.log(7 / 3)
    assert bm25.idf.tolist() == pytest.approx([0.15 * rare] + [rare] * 4)
    # "a" in a text of 2 tokens, avgdl = 7/4: norm = 1.5 (0.25 + 0.75 * 2 / 1.75) = 1.6607; tf = 1
    score = 0.15 * rare * 1 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / 1.75))
    scores = bm25.scores(["a"], np.zeros(4))
    assert scores.tolist() == pytest.approx([score, score, score, 0.0]) and score == pytest.approx(0.1194, abs=1e-4)
    assert scores.tolist() == BM25Okapi(documents).get_scores(["a"]).tolist()  # equal, not close


def test_a_distinct_text_counts_as_many_chunks_as_hold_it():
    bm25 = index([["x"], ["y"]], counts=[3, 1])  # as x, x, x, y: N = 4, df(x) = 3, df(y) = 1, avgdl = 1
    # idf: x ln(1.5 / 3.5), y ln(3.5 / 1.5): their mean is 0, so x's floor is 0; y: tf = 1, norm = k1: weight 1
    scores = bm25.scores(["y", "x"], np.zeros(2))
    assert scores.tolist() == pytest.approx([0.0, math.log(7 / 3)])
    assert scores.tolist() == BM25Okapi([["x"], ["x"], ["x"], ["y"]]).get_scores(["y", "x"])[[0, 3]].tolist()


def test_a_query_word_asked_twice_counts_twice_and_an_unknown_word_adds_nothing():
    bm25 = index([["mill", "stone"], ["wheat"], ["river"]])
    once = bm25.scores(["mill"], np.zeros(3))
    assert once[0] > 0 and once[1:].tolist() == [0.0, 0.0]
    assert bm25.scores(["mill", "quay", "mill"], np.zeros(3)).tolist() == pytest.approx((2 * once).tolist())
    start = np.array([1.0, 2.0, 3.0])  # scores are added into what ``out`` holds
    assert bm25.scores(["mill"], start).tolist() == pytest.approx([1.0 + once[0], 2.0, 3.0])


def test_texts_without_any_token_make_no_index():
    bm25 = index([[], []])
    assert bm25.vocabulary == {} and bm25.size == 2 and not hasattr(bm25, "idf")


def test_top_n_is_get_top_ns_order_ties_included():
    tied = np.array([0.1, 0.5, 0.3, 0.5, 0.0])
    # np.argsort(tied)[::-1] is [3, 1, 2, 0, 4]: of the tied 0.5s, the later text first
    for depth in range(6):
        assert top_n(tied, depth).tolist() == [3, 1, 2, 0, 4][:depth]
    distinct = np.array([0.2, 0.9, 0.5, 0.1, 0.7])  # strictly ordered: the partial sort's answer
    assert top_n(distinct, 2).tolist() == [1, 4] and top_n(distinct, 5).tolist() == [1, 4, 2, 0, 3]
