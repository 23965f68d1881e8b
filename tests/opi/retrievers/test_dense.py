"""opi.retrievers.dense: DPS (dot product of raw vectors), kNN (cosine) and MMR (LangChain's maximal marginal
relevance over the fetch_k most similar chunks), on hand-set vectors and on the real model."""
import pytest

from opi.retrievers import DPSRetriever, KNNRetriever, MMRRetriever
from tests.helpers.chunks import TableEmbedder, make_chunks


def test_dps_and_knn_disagree_when_the_norm_matters():
    chunks = make_chunks(["aligned", "long but off-axis", "other", "fourth"])
    embedder = TableEmbedder({"q": [1, 0], "aligned": [1, 0], "long but off-axis": [3, 3], "other": [0, 1],
                              "fourth": [-1, 0]})
    (dps,) = DPSRetriever(embedder=embedder).rank(["q"], chunks, 4)
    (knn,) = KNNRetriever(embedder=embedder).rank(["q"], chunks, 4)
    # dot products with q = (1, 0): 1, 3, 0, -1; cosines: 1, 3/sqrt(18) = 0.7071, 0, -1
    assert dps.chunk_ids == (1, 0, 2, 3) and dps.scores == (3.0, 1.0, 0.0, -1.0)
    assert knn.chunk_ids == (0, 1, 2, 3) and knn.scores == pytest.approx((1.0, 0.7071, 0.0, -1.0), abs=1e-4)


# unit vectors; cosine with q: c0 0.96, c1 0.8, c2 0.6, c3 -1; c1 is close to c0 (cosine 0.936), c2 is not (0.352)
MMR_TABLE = {"q": [1, 0], "c0": [0.96, 0.28], "c1": [0.8, 0.6], "c2": [0.6, -0.8], "c3": [-1, 0]}
MMR_CHUNKS = make_chunks(["c0", "c1", "c2", "c3"])


def test_mmr_by_hand():
    embedder = TableEmbedder(MMR_TABLE)
    (ranking,) = MMRRetriever(embedder=embedder, fetch_k=4, lambda_mult=0.5).rank(["q"], MMR_CHUNKS, 4)
    # pick 1: c0 (most similar). pick 2: 0.5 * sim(q) - 0.5 * max sim(picked):
    #   c1 0.5 * 0.8 - 0.5 * 0.936 = -0.068; c2 0.5 * 0.6 - 0.5 * 0.352 = 0.124; c3 0.5 * -1 - 0.5 * -0.96 = -0.02
    # pick 3: c1 0.4 - 0.5 * max(0.936, 0) = -0.068; c3 -0.5 - 0.5 * max(-0.96, -0.6) = -0.2 -> c1; then c3
    assert ranking.chunk_ids == (0, 2, 1, 3)
    assert ranking.scores == pytest.approx((0.96, 0.6, 0.8, -1.0))  # the similarity to the question, not MMR's


def test_mmr_picks_only_among_the_fetch_k_most_similar_chunks():
    (ranking,) = MMRRetriever(k=2, embedder=TableEmbedder(MMR_TABLE), fetch_k=3).rank(["q"], MMR_CHUNKS, 4)
    assert ranking.chunk_ids == (0, 2, 1)  # c3, the least similar, is no candidate: 3 chunks for depth 4


@pytest.mark.parametrize("lambda_mult, expected", [
    (1.0, (0, 1, 2, 3)),  # relevance only: kNN's order
    (0.0, (0, 3, 2, 1)),  # diversity only: after c0, the chunk least like those picked (c3: -0.96, then c2: 0.352)
])
def test_mmr_lambda_weighs_relevance_against_diversity(lambda_mult, expected):
    embedder = TableEmbedder(MMR_TABLE)
    (ranking,) = MMRRetriever(embedder=embedder, fetch_k=4, lambda_mult=lambda_mult).rank(["q"], MMR_CHUNKS, 4)
    assert ranking.chunk_ids == expected


def test_mmr_skips_the_near_duplicate_that_knn_takes_second(tiny_chunks, embedder):
    question = ["When did the lighthouse keeper light the lamp?"]
    (knn,) = KNNRetriever(embedder=embedder).rank(question, tiny_chunks, 4)
    (mmr,) = MMRRetriever(embedder=embedder, fetch_k=8, lambda_mult=0.5).rank(question, tiny_chunks, 4)
    assert set(knn.chunk_ids[:2]) == {0, 1}  # the two near-duplicate chunks lead the plain similarity ranking
    assert mmr.chunk_ids[0] == knn.chunk_ids[0]
    assert mmr.chunk_ids[1] not in (0, 1)


@pytest.mark.parametrize("settings, message", [
    ({"k": 4, "fetch_k": 2}, r"fetch_k \(2\) must be >= k \(4\)"),
    ({"lambda_mult": 1.5}, r"lambda_mult must be a finite number in \[0, 1\], got 1.5"),
    ({"lambda_mult": -0.1}, r"lambda_mult must be a finite number in \[0, 1\], got -0.1"),
])
def test_mmr_refuses_bad_settings(settings, message):
    with pytest.raises(ValueError, match=message):
        MMRRetriever(**settings)


def test_prepare_embeds_every_question_and_chunk_in_one_call():
    embedder = TableEmbedder(MMR_TABLE)
    KNNRetriever(embedder=embedder).prepare(["q"], MMR_CHUNKS)
    assert embedder.raw_calls == [["q", "c0", "c1", "c2", "c3"]]


def test_knn_on_the_real_model_finds_the_paraphrased_chunk(tiny_chunks, embedder):
    (ranking,) = KNNRetriever(embedder=embedder).rank(["Where were the fishing boats guided to before a storm?"],
                                                      tiny_chunks, 4)
    assert ranking.chunk_ids[0] == 2  # "Fishing boats returned to the harbour before storms, guided by the beam"
    assert all(-1.0 <= s <= 1.0 + 1e-6 for s in ranking.scores)  # cosine


def full_matrix_rankings(retriever, questions, chunks, depth):
    """DPS / kNN as ranked before blocks: the whole question x chunk matrix, a stable sort of each row."""
    from opi.retrievers.base import Ranking

    q = retriever.embedder.encode(questions, normalize=retriever.normalize)
    d = retriever.embedder.encode([c.text for c in chunks], normalize=retriever.normalize)
    return [Ranking.from_scores(row, depth) for row in q @ d.T]


@pytest.mark.parametrize("scope", ["article", "corpus"])
@pytest.mark.parametrize("kind", [DPSRetriever, KNNRetriever])
def test_blocked_search_is_the_full_matrix_ranking_on_the_bundled_set(deeplogic_130, embedder, small_blocks, kind,
                                                                       scope):
    retriever = kind(embedder=embedder)
    indexes = deeplogic_130.by_article if scope == "article" else [(deeplogic_130.questions, deeplogic_130.corpus)]
    for questions, chunks in indexes:
        blocked, full = retriever.rank(questions, chunks, 20), full_matrix_rankings(retriever, questions, chunks, 20)
        assert [r.chunk_ids for r in blocked] == [r.chunk_ids for r in full]
        # BLAS adds a product of a 64-chunk block in another order than the whole matrix's: float32 rounding
        for b, f in zip(blocked, full):
            assert b.scores == pytest.approx(f.scores, rel=1e-6, abs=1e-6)


def test_repeated_chunk_texts_are_embedded_and_scored_once_and_rank_by_position():
    chunks = make_chunks(["c1", "c0", "c1", "c2", "c0"])
    embedder = TableEmbedder(MMR_TABLE)
    asked = []
    embedder.encode = lambda texts, normalize=True, encode=embedder.encode: asked.append(list(texts)) or encode(
        texts, normalize)
    (ranking,) = KNNRetriever(embedder=embedder).rank(["q"], chunks, 5)
    assert ["c1", "c0", "c2"] in asked  # each distinct text once, in order of first appearance
    assert ranking.chunk_ids == (1, 4, 0, 2, 3)  # c0 (0.96) at 1 and 4, c1 (0.8) at 0 and 2, c2 (0.6)


def test_faiss_index_finds_the_exact_top_k_on_a_small_index(deeplogic_130, embedder):
    pytest.importorskip("faiss")
    questions, chunks = deeplogic_130.questions, deeplogic_130.corpus
    exact = KNNRetriever(embedder=embedder).rank(questions, chunks, 4)
    approximate = KNNRetriever(embedder=embedder, index="faiss").rank(questions, chunks, 4)
    # a flat faiss index below 10,000 vectors: the same chunks, scores equal up to float rounding
    assert [r.chunk_ids for r in approximate] == [r.chunk_ids for r in exact]
    for a, e in zip(approximate, exact):
        assert a.scores == pytest.approx(e.scores, abs=1e-5)
    assert KNNRetriever(index="faiss").label == "kNN (faiss)"


def test_an_unknown_index_is_refused():
    with pytest.raises(ValueError, match="index must be one of exact, faiss, got 'hnsw'"):
        KNNRetriever(index="hnsw")
