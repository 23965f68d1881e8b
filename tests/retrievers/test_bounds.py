import pytest

from opi.data import Example
from opi.retrievers import OracleRetriever, RandomRetriever
from tests.retrievers.conftest import TINY_ARTICLE


def example(*evidence):
    return Example("e", " ".join(TINY_ARTICLE), "Where was the zirconium kept?", "In the customs shed.", None, evidence)


def test_random_is_seeded_per_question_and_returns_k_distinct_chunks(tiny_chunks):
    questions = ["Who lit the lamp?", "What arrived in spring?"]
    first, again = RandomRetriever(k=3, seed=1).rank(questions, tiny_chunks), \
        RandomRetriever(k=3, seed=1).rank(questions, tiny_chunks)
    assert [r.chunk_ids for r in first] == [r.chunk_ids for r in again]
    assert all(len(set(r.chunk_ids)) == 3 for r in first)
    seeds = {RandomRetriever(k=3, seed=s).rank(questions[:1], tiny_chunks)[0].chunk_ids for s in range(6)}
    assert len(seeds) > 1  # another seed, another draw


def test_the_oracle_returns_the_fewest_chunks_holding_the_evidence(tiny_chunks):
    oracle = OracleRetriever(k=4)
    (ranking,) = oracle.rank_examples([example(TINY_ARTICLE[5])], tiny_chunks)
    assert ranking.chunk_ids == (5,)
    # two pieces, each held by one chunk: both chunks, nothing else
    (ranking,) = oracle.rank_examples([example(TINY_ARTICLE[3], TINY_ARTICLE[6])], tiny_chunks)
    assert set(ranking.chunk_ids) == {3, 6}
    (capped,) = OracleRetriever(k=1).rank_examples([example(TINY_ARTICLE[3], TINY_ARTICLE[6])], tiny_chunks)
    assert len(capped.chunk_ids) == 1
    (none,) = oracle.rank_examples([example()], tiny_chunks)
    assert none.chunk_ids == ()
    with pytest.raises(ValueError, match="needs their gold evidence"):
        oracle.rank(["a question"], tiny_chunks)
