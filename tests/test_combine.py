import pytest

from opi.combine import NAMED_SETS, reciprocal_rank_fusion, sentence_union
from opi.retrievers import RETRIEVERS, Ranking
from opi.sentences import expand


def test_rrf_matches_hand_computation():
    a = Ranking((1, 2, 3), (0.9, 0.8, 0.7))
    b = Ranking((3, 1, 4), (0.5, 0.4, 0.3))
    fused = reciprocal_rank_fusion([a, b], c=60, k=None)
    # chunk 1: 1/61 + 1/62; chunk 3: 1/63 + 1/61; chunk 2: 1/62; chunk 4: 1/63
    assert fused.chunk_ids == (1, 3, 2, 4)
    assert fused.scores[0] == pytest.approx(1 / 61 + 1 / 62)
    assert fused.scores[1] == pytest.approx(1 / 63 + 1 / 61)
    weighted = reciprocal_rank_fusion([a, b], weights=[0.1, 1.0], c=60, k=2)
    assert weighted.chunk_ids == (3, 1)


def test_rrf_ties_keep_first_appearance():
    fused = reciprocal_rank_fusion([Ranking((7,), (1.0,)), Ranking((5,), (1.0,))], k=None)
    assert fused.chunk_ids == (7, 5)


def test_a_seven_returns_exactly_four_chunks(tiny_chunks, embedder):
    rankings = [RETRIEVERS[name](k=4, embedder=embedder).rank(["Who guided the fishing boats?"], tiny_chunks)[0]
                for name in NAMED_SETS["seven"]]
    fused = reciprocal_rank_fusion(rankings, k=4)
    assert len(fused.chunk_ids) == 4
    assert len(set().union(*[r.chunk_ids for r in rankings])) > 4  # the cut mattered


def test_s_two_is_the_union_of_knn_and_dps_sentences(tiny_chunks, embedder):
    question = ["Who guided the fishing boats?"]
    per_member = {}
    for name in NAMED_SETS["two"]:
        (ranking,) = RETRIEVERS[name](k=4, embedder=embedder).rank(question, tiny_chunks)
        per_member[name] = expand(tiny_chunks[i].sentence_ids for i in ranking.chunk_ids)
    union = sentence_union(per_member.values())
    assert set(union) == set(per_member["knn"]) | set(per_member["dps"])
    assert union == sorted(set(union))
