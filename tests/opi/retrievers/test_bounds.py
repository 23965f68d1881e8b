"""opi.retrievers.bounds: the seeded random retriever (lower bound) and the evidence oracle (upper bound)."""
import pytest

from opi.data import Example
from opi.retrievers import OracleRetriever, RandomRetriever
from tests.helpers.chunks import TINY_ARTICLE, make_chunks


def example(*evidence):
    return Example("e", " ".join(TINY_ARTICLE), "Where was the zirconium kept?", "In the customs shed.", None, evidence)


def test_random_is_seeded_per_question_and_returns_distinct_chunks(tiny_chunks):
    questions = ["Who lit the lamp?", "What arrived in spring?"]
    first = RandomRetriever(random_seed=1).rank(questions, tiny_chunks, 3)
    assert first == RandomRetriever(random_seed=1).rank(questions, tiny_chunks, 3)  # the same in every run
    assert all(len(set(r.chunk_ids)) == 3 for r in first)
    assert first[0].chunk_ids != first[1].chunk_ids  # another question, another draw
    seeds = {RandomRetriever(random_seed=s).rank(questions[:1], tiny_chunks, 3)[0].chunk_ids for s in range(6)}
    assert len(seeds) > 1  # another seed, another draw


def test_random_to_a_depth_beyond_the_chunks_is_a_permutation_of_them(tiny_chunks):
    (ranking,) = RandomRetriever(random_seed=2).rank(["Who lit the lamp?"], tiny_chunks, 50)
    assert sorted(ranking.chunk_ids) == list(range(len(tiny_chunks)))
    assert ranking.scores[:3] == (1.0, 0.5, 1 / 3)


def test_the_oracle_returns_the_fewest_chunks_holding_the_evidence(tiny_chunks):
    oracle = OracleRetriever()
    (ranking,) = oracle.rank_examples([example(TINY_ARTICLE[5])], tiny_chunks, 4)
    assert ranking.chunk_ids == (5,)
    # two pieces, each held by one chunk: both chunks, nothing else
    (ranking,) = oracle.rank_examples([example(TINY_ARTICLE[3], TINY_ARTICLE[6])], tiny_chunks, 4)
    assert set(ranking.chunk_ids) == {3, 6}
    (capped,) = oracle.rank_examples([example(TINY_ARTICLE[3], TINY_ARTICLE[6])], tiny_chunks, 1)
    assert len(capped.chunk_ids) == 1
    (none,) = oracle.rank_examples([example()], tiny_chunks, 4)
    assert none.chunk_ids == ()


def test_the_oracle_picks_the_chunk_holding_the_most_pieces_first():
    chunks = make_chunks(["Ann rowed. Ben sailed.", "Ben sailed. Cal swam.", "Dee ran."])
    oracle = OracleRetriever()
    # pieces Ben, Cal, Dee: chunk 1 holds two (Ben, Cal), then chunk 2 holds Dee
    (ranking,) = oracle.rank_examples([example("Ben sailed.", "Cal swam.", "Dee ran.")], chunks, 4)
    assert ranking.chunk_ids == (1, 2)
    # pieces Ann, Ben, Cal: chunks 0 and 1 both hold two; the tie goes to the earlier, then Cal's chunk 1
    (ranking,) = oracle.rank_examples([example("Ann rowed.", "Ben sailed.", "Cal swam.")], chunks, 4)
    assert ranking.chunk_ids == (0, 1)


def test_a_piece_no_chunk_holds_whole_goes_to_the_chunk_sharing_most_content_words(tiny_chunks):
    paraphrase = "The zirconium sand was kept in the customs shed."  # not verbatim: chunk 5 shares 4 content words
    (ranking,) = OracleRetriever().rank_examples([example(paraphrase)], tiny_chunks, 4)
    assert ranking.chunk_ids == (5,)
    (nothing,) = OracleRetriever().rank_examples([example("Quasars emit radiation.")], tiny_chunks, 4)
    assert nothing.chunk_ids == ()  # no content word in common: no chunk is credited


def test_the_oracle_ranks_examples_not_questions(tiny_chunks):
    with pytest.raises(ValueError, match="needs their gold evidence"):
        OracleRetriever().rank(["a question"], tiny_chunks, 4)
