"""The approximate nearest-neighbour search (``opi.retrievers.ann.search``) against exact search by numpy on a tiny
random matrix (fixed seed): the flat index below ``EXACT_BELOW`` and the inverted-file index (forced on by lowering
``EXACT_BELOW``) with every cell probed give exact search's rows and scores; with one cell probed a row is padded
with -1 where the cell held fewer, every row it does give scored as exactly; the depth is clamped and the settings
refused name what is wrong. kNN's faiss index over a real corpus is in tests/opi/retrievers/test_dense.py."""
import sys

import numpy as np
import pytest

from opi.retrievers import ann

RNG = np.random.default_rng(7)
VECTORS = RNG.normal(size=(400, 16)).astype(np.float32)
QUERIES = RNG.normal(size=(10, 16)).astype(np.float32)
PRODUCTS = QUERIES @ VECTORS.T


def exact(depth):
    rows = np.argsort(-PRODUCTS, axis=1, kind="stable")[:, :depth]
    return rows, np.take_along_axis(PRODUCTS, rows, axis=1)


@pytest.fixture
def faiss():
    return pytest.importorskip("faiss")


def test_a_small_index_is_searched_exhaustively_as_exact_search(faiss):
    # float64 and Fortran order: made contiguous float32 by search
    rows, scores = ann.search(np.asfortranarray(QUERIES, dtype=np.float64), np.asfortranarray(VECTORS), 5)
    expected_rows, expected_scores = exact(5)
    np.testing.assert_array_equal(rows, expected_rows)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-5)
    assert rows.dtype == np.int64 and scores.dtype == np.float32


def test_the_inverted_file_index_with_every_cell_probed_is_exact(faiss, monkeypatch):
    monkeypatch.setattr(ann, "EXACT_BELOW", 0)  # 400 vectors: sqrt -> 20 cells, all 20 within NPROBE (32)
    rows, scores = ann.search(QUERIES, VECTORS, 5)
    expected_rows, expected_scores = exact(5)
    np.testing.assert_array_equal(rows, expected_rows)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-5)


def test_one_cell_probed_pads_with_minus_one_and_every_row_found_is_scored_exactly(faiss, monkeypatch):
    monkeypatch.setattr(ann, "EXACT_BELOW", 0)
    monkeypatch.setattr(ann, "NPROBE", 1)
    rows, scores = ann.search(QUERIES, VECTORS, 50)  # one cell of 20 holds about 20 vectors, fewer than 50
    assert rows.shape == (10, 50) and (rows == -1).any()
    for query, (row, score) in enumerate(zip(rows, scores)):
        found = row >= 0
        assert list(found) == sorted(found, reverse=True)  # the padding is at the end only
        np.testing.assert_allclose(score[found], PRODUCTS[query, row[found]], rtol=1e-5, atol=1e-5)
        assert np.all(np.diff(score[found]) <= 1e-6)  # best first
    assert not np.array_equal(rows[:, :5], exact(5)[0])  # one cell is not exact search: the IVF index was used


def test_the_depth_is_clamped_to_the_vectors_and_nothing_asked_is_an_empty_result(faiss):
    rows, scores = ann.search(QUERIES[:2], VECTORS[:3], 10)
    assert rows.shape == scores.shape == (2, 3)
    np.testing.assert_array_equal(np.sort(rows, axis=1), [[0, 1, 2], [0, 1, 2]])
    for depth, queries in ((0, QUERIES), (5, QUERIES[:0])):
        rows, scores = ann.search(queries, VECTORS, depth)
        assert rows.shape == scores.shape == (len(queries), 0) and rows.dtype == np.int64


def test_an_unknown_metric_and_a_missing_faiss_are_refused_with_what_to_do(monkeypatch):
    with pytest.raises(ValueError, match="^unknown metric 'l2'$"):
        ann.search(QUERIES, VECTORS, 5, metric="l2")
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss now raises ImportError
    with pytest.raises(ImportError, match=r"needs faiss-cpu: pip install -e '\.\[ann\]'$"):
        ann.search(QUERIES, VECTORS, 5)
