import pytest

from opi.combine import RankFusion, SentenceUnion, reciprocal_rank_fusion, sentence_union
from opi.components import with_resources
from opi.retrievers import Ranking
from tests.flows.test_config import compose_typed


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


def sentences_of(chunks):
    return lambda chunk_ids: sentence_union(chunks[i].sentence_ids for i in chunk_ids)


def test_a_seven_returns_exactly_four_chunks(tiny_chunks, embedder):
    config = compose_typed(["setup=a_seven"])
    assert isinstance(config.combination, RankFusion) and len(config.members()) == 7
    rankings = [with_resources(r, embedder=embedder).rank(["Who guided the fishing boats?"], tiny_chunks)[0]
                for r in config.members().values()]
    retrieved = config.combination.combine(rankings, sentences_of(tiny_chunks))
    assert retrieved.chunk_ids == reciprocal_rank_fusion(rankings, k=4).chunk_ids and len(retrieved.chunk_ids) == 4
    assert len(set().union(*[r.chunk_ids for r in rankings])) > 4  # the cut mattered


def test_s_two_is_the_union_of_knn_and_dps_sentences(tiny_chunks, embedder):
    config = compose_typed(["setup=s_two"])
    assert isinstance(config.combination, SentenceUnion) and list(config.members()) == ["knn", "dps"]
    question = ["Who guided the fishing boats?"]
    rankings, per_member = [], {}
    for name, retriever in config.members().items():
        (ranking,) = with_resources(retriever, embedder=embedder).rank(question, tiny_chunks)
        rankings.append(ranking)
        per_member[name] = sentences_of(tiny_chunks)(ranking.chunk_ids)
    union = config.combination.combine(rankings, sentences_of(tiny_chunks)).sentence_ids
    assert set(union) == set(per_member["knn"]) | set(per_member["dps"])
    assert list(union) == sorted(set(union))


def test_combinations_refuse_bad_settings():
    with pytest.raises(ValueError, match="at least two members"):
        RankFusion(name="A-One", members=["knn"])
    with pytest.raises(ValueError, match="2 weights for 3 members"):
        RankFusion(members=["knn", "dps", "mmr"], weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="lists a member twice"):
        SentenceUnion(members=["knn", "knn"])
