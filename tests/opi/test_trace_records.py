from collections import Counter

import pytest

from opi.combine import Retrieved
from opi.retrievers import Ranking
from opi.trace_records import chunk_sources, traced_ids

IDS = [f"q{i:03d}" for i in range(130)]
RELATIONS = [f"r{i % 13}" for i in range(130)]


def test_a_sample_of_26_holds_two_of_each_of_13_relations_and_the_same_ids_whatever_the_row_order():
    chosen = traced_ids(IDS, RELATIONS, 26)
    assert len(chosen) == 26
    assert Counter(RELATIONS[IDS.index(i)] for i in chosen) == {f"r{k}": 2 for k in range(13)}
    reordered = traced_ids(IDS[::-1], RELATIONS[::-1], 26)
    assert sorted(reordered) == sorted(chosen)  # drawn by id, not position: configurations pair
    assert chosen == [i for i in IDS if i in set(chosen)]  # in data order
    assert traced_ids(IDS, RELATIONS, 26, seed=1) != chosen


def test_strata_share_the_sample_by_size_with_one_each_first():
    relations = ["a"] * 80 + ["b"] * 15 + ["c"] * 5
    ids = [str(i) for i in range(100)]
    counts = Counter(relations[int(i)] for i in traced_ids(ids, relations, 10))
    # one each, then the 7 left by share: a 7*0.8 = 5.6, b 1.05, c 0.35 -> 5, 1, 0 and the largest remainder (a)
    assert counts == {"a": 7, "b": 2, "c": 1}


@pytest.mark.parametrize("n", [None, 100, 500])
def test_all_examples_when_n_is_none_or_not_smaller_than_the_data(n):
    assert traced_ids(IDS[:100], RELATIONS[:100], n) == IDS[:100]


def test_rows_without_relation_are_one_stratum():
    assert len(traced_ids(IDS, [None] * 130, 7)) == 7


def test_a_single_or_fused_configuration_scores_chunks_by_its_own_ranking():
    own = Ranking((5, 2, 9, 1), (0.9, 0.8, 0.7, 0.6))
    retrieved = Retrieved((5, 2, 9), (0, 1))
    assert chunk_sources(retrieved, own, [], [], "A-Two") == [(0.9, "A-Two"), (0.8, "A-Two"), (0.7, "A-Two")]


def test_a_sentence_union_scores_each_chunk_by_the_first_member_that_found_it():
    knn, bm25 = Ranking((3, 4), (0.7, 0.6)), Ranking((4, 8), (12.0, 9.5))
    retrieved = Retrieved((3, 4, 8), (0, 1, 2))
    assert chunk_sources(retrieved, None, [knn, bm25], ["kNN", "BM25"], "S-Two") == [
        (0.7, "kNN"), (0.6, "kNN"), (9.5, "BM25")]
