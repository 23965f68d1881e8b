"""opi.combine: reciprocal-rank fusion (LangChain's EnsembleRetriever rule), the sentence union, and the Single, A-
(RankFusion) and S- (SentenceUnion) combinations over member rankings already cut to each member's k."""
import pytest

from opi.combine import RankFusion, Retrieved, SentenceUnion, Single, reciprocal_rank_fusion, sentence_union
from opi.retrievers import Ranking

A = Ranking((1, 2, 3), (0.9, 0.8, 0.7))
B = Ranking((3, 1, 4), (0.5, 0.4, 0.3))
SENTENCES = {1: (0, 1), 2: (2,), 3: (1, 3), 4: (5,), 9: (8,)}  # chunk -> the complete sentences it covers


def sentences_of(chunk_ids):
    return sentence_union(SENTENCES[i] for i in chunk_ids)


def test_rrf_by_hand():
    fused = reciprocal_rank_fusion([A, B], c=60, k=None)
    # equal weights are 1/2 each (LangChain's): chunk 1: .5/61 + .5/62; chunk 3: .5/63 + .5/61; 2: .5/62; 4: .5/63
    assert fused.chunk_ids == (1, 3, 2, 4)
    assert fused.scores == pytest.approx((.5 / 61 + .5 / 62, .5 / 63 + .5 / 61, .5 / 62, .5 / 63))


def test_rrf_is_langchains_ensemble_retriever_to_the_last_tie():
    import random

    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    class Fixed(BaseRetriever):
        ids: list

        def _get_relevant_documents(self, query, *, run_manager):
            return [Document(page_content=str(i), metadata={"id": i}) for i in self.ids]

    rng = random.Random(7)
    for _ in range(200):  # seven members' rankings of 8 chunks out of 12, many exact ties among the sums
        members = [rng.sample(range(12), 8) for _ in range(7)]
        ensemble = EnsembleRetriever(retrievers=[Fixed(ids=m) for m in members], id_key="id")
        theirs = [d.metadata["id"] for d in ensemble.invoke("q")]
        ours = reciprocal_rank_fusion([Ranking(tuple(m), (0.0,) * 8) for m in members], k=None).chunk_ids
        assert list(ours) == theirs


def test_weighted_rrf_by_hand():
    fused = reciprocal_rank_fusion([A, B], weights=[0.1, 1.0], c=60, k=2)
    # chunk 3: 0.1/63 + 1/61 = 0.017980; chunk 1: 0.1/61 + 1/62 = 0.017769; chunk 4: 1/63 = 0.015873
    assert fused.chunk_ids == (3, 1)
    assert fused.scores == pytest.approx((0.1 / 63 + 1 / 61, 0.1 / 61 + 1 / 62))


def test_c_decides_between_one_first_place_and_agreement_on_a_lower_place():
    first, second = Ranking((1, 2, 9), (0.0,) * 3), Ranking((3, 4, 9), (0.0,) * 3)
    # c = 60: chunk 9 2/63 = 0.0317 beats chunk 1 (or 3) 1/61 = 0.0164; then 2 and 4 at 1/62
    assert reciprocal_rank_fusion([first, second], c=60, k=None).chunk_ids == (9, 1, 3, 2, 4)
    # c = 0.5: chunk 1 (and 3) 1/1.5 = 0.667 beat chunk 9 2/3.5 = 0.571; 1 before 3: it appears first
    assert reciprocal_rank_fusion([first, second], c=0.5, k=None).chunk_ids == (1, 3, 9, 2, 4)
    assert reciprocal_rank_fusion([second], k=2).chunk_ids == (3, 4)  # one member: its own order, cut


def test_rrf_ties_keep_first_appearance():
    fused = reciprocal_rank_fusion([Ranking((7,), (1.0,)), Ranking((5,), (1.0,))], k=None)
    assert fused.chunk_ids == (7, 5)


def test_rrf_refuses_no_rankings_and_mismatched_weights():
    with pytest.raises(ValueError, match="needs at least one ranking"):
        reciprocal_rank_fusion([])
    with pytest.raises(ValueError, match="2 weights for 1 rankings"):
        reciprocal_rank_fusion([A], weights=[1.0, 2.0])


def test_sentence_union_removes_duplicates_in_article_order():
    assert sentence_union([(4, 1), (1, 2), (), (0,)]) == [0, 1, 2, 4]


def test_single_hands_on_its_rankings_chunks_and_their_sentences():
    assert Single().combine([A], sentences_of) == Retrieved((1, 2, 3), (0, 1, 2, 3))
    with pytest.raises(ValueError):
        Single().combine([A, B], sentences_of)  # one member only


def test_rank_fusion_returns_exactly_k_chunks_though_the_members_hold_more():
    fused = RankFusion(members=["a", "b"], k=2).combine([A, B], sentences_of)
    assert fused == Retrieved((1, 3), (0, 1, 3))  # chunks 1 and 3 (see test_rrf_by_hand); sentences 0, 1 | 1, 3
    assert len(set(A.chunk_ids) | set(B.chunk_ids)) == 4  # the cut mattered
    everything = RankFusion(members=["a", "b"], k=None).combine([A, B], sentences_of)
    assert everything.chunk_ids == (1, 3, 2, 4)  # k=None: LangChain's EnsembleRetriever, every fused chunk


def test_rank_fusion_uses_its_weights_and_c():
    weighted = RankFusion(members=["a", "b"], weights=[0.1, 1.0], k=2).combine([A, B], sentences_of)
    assert weighted.chunk_ids == (3, 1)  # see test_weighted_rrf_by_hand
    first, second = Ranking((1, 2, 9), (0.0,) * 3), Ranking((3, 4, 9), (0.0,) * 3)
    assert RankFusion(members=["a", "b"], c=0.5, k=1).combine([first, second], sentences_of).chunk_ids == (1,)


def test_sentence_union_combines_each_members_own_sentences():
    # members cut to their own k: A to 1 chunk (1), B to 2 chunks (3, 1)
    union = SentenceUnion(members=["a", "b"]).combine([A.top(1), B.top(2)], sentences_of)
    assert union.chunk_ids == (1, 3)  # first appearance, de-duplicated
    assert union.sentence_ids == (0, 1, 3)  # chunk 1: 0, 1; chunk 3: 1, 3 -- in article order, 1 once


@pytest.mark.parametrize("make, message", [
    (lambda: RankFusion(name="A-One", members=["knn"]), r"combination A-One needs at least two members, got \['knn'\]"),
    (lambda: RankFusion(members=["knn", "dps", "mmr"], weights=[1.0, 2.0]), "A-: 2 weights for 3 members"),
    (lambda: SentenceUnion(members=["knn", "knn"]), "combination S- lists a member twice"),
    (lambda: SentenceUnion(members=[]), "needs at least two members"),
    (lambda: RankFusion(members=["knn", "dps"], k=0), "k must be >= 1 or null, got 0"),
    (lambda: RankFusion(members=["knn", "dps"], c=0), "c must be a finite number > 0, got 0"),
])
def test_combinations_refuse_bad_settings(make, message):
    with pytest.raises(ValueError, match=message):
        make()
