"""opi.retrievers.topk: block by block top-k equals a full stable sort, ties and repeated texts included."""
import numpy as np
import pytest

from opi.retrievers.base import Ranking
from opi.retrievers.topk import DistinctTexts, block_length, select, top_k


def full_sort(scores: np.ndarray, depth: int) -> list[list[int]]:
    return [list(np.argsort(-row, kind="stable")[:depth]) for row in scores]


@pytest.mark.parametrize("block", [1, 3, 7, 64])
@pytest.mark.parametrize("depth", [1, 4, 20, 50])
def test_blocks_give_the_full_sorts_ranking_ties_to_the_earlier_column(block, depth):
    # scores from a few values only: most of the ranking is ties, split by blocks in every possible way
    scores = np.random.default_rng(block * 100 + depth).integers(0, 4, size=(9, 40)).astype(float)
    columns, values = top_k(lambda start, stop: scores[:, start:stop], 9, 40, depth, block)
    assert columns.tolist() == full_sort(scores, depth)
    assert values.tolist() == [list(row[order]) for row, order in zip(scores, full_sort(scores, depth))]


def test_select_settles_a_tie_argpartition_split_by_position():
    scores = np.array([[0.0, 1.0, 0.0, 1.0, 1.0, 0.0]])
    assert select(scores, 2)[0].tolist() == [[1, 3]]
    assert select(scores, 4)[0].tolist() == [[1, 3, 4, 0]]


def test_no_columns_or_no_rows():
    columns, values = top_k(lambda start, stop: np.zeros((3, stop - start)), 3, 0, 4, 8)
    assert columns.shape == (3, 0)
    assert top_k(lambda start, stop: np.zeros((0, stop - start)), 0, 10, 4, 8)[0].shape == (0, 4)


def test_block_length_keeps_a_block_within_the_budget():
    assert block_length(1000, 8, budget=8_000_000) == 1000
    assert block_length(10**6, 8, budget=1000) == 64  # never fewer than 64 columns


def test_repeated_texts_are_indexed_once_and_rank_as_their_chunks_would():
    texts = ["b", "a", "b", "c", "a", "b", "d"]
    distinct = DistinctTexts.of(texts)
    assert distinct.texts == ["b", "a", "c", "d"] and distinct.inverse.tolist() == [0, 1, 0, 2, 1, 0, 3]
    assert distinct.counts.tolist() == [3, 2, 1, 1]
    # "a" and "c" tie: their chunks (1, 4 and 3) interleave by position, as a sort of the chunks' scores does
    text_scores = np.array([[0.5, 0.9, 0.9, 0.1], [0.0, 0.0, 0.0, 0.0]])
    chunk_scores = text_scores[:, distinct.inverse]
    for depth in (1, 3, 5, 7):
        rows, values = select(text_scores, depth)
        rankings = distinct.rankings(rows, values, depth)
        expected = full_sort(chunk_scores, depth)
        assert [list(r.chunk_ids) for r in rankings] == expected
        assert rankings[0] == Ranking(tuple(expected[0]), tuple(chunk_scores[0, expected[0]]))
