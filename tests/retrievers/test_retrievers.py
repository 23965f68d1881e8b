import dataclasses

import pytest

from opi.retrievers import DPSRetriever, EDIRetriever, KNNRetriever, MMRRetriever, SVMRetriever
from opi.retrievers.langchain import LangChainRetriever, as_langchain
from opi.retrievers.lexical import BM25Retriever, TFIDFRetriever
from tests.retrievers.conftest import TableEmbedder, make_chunks


SEVEN = [DPSRetriever, KNNRetriever, BM25Retriever, SVMRetriever, TFIDFRetriever, MMRRetriever, EDIRetriever]


@pytest.mark.parametrize("cls", SEVEN)
def test_each_retriever_returns_k_distinct_chunks(cls, tiny_chunks, embedder):
    retriever = cls(k=4, embedder=embedder)
    rankings = retriever.rank(["Who lit the lamp?", "What arrived in spring?"], tiny_chunks)
    assert len(rankings) == 2
    for ranking in rankings:
        assert len(ranking.chunk_ids) == 4 == len(set(ranking.chunk_ids))
        assert all(0 <= i < len(tiny_chunks) for i in ranking.chunk_ids)


@pytest.mark.parametrize("cls", [BM25Retriever, TFIDFRetriever])
def test_lexical_retrievers_rank_the_rare_term_first(cls, tiny_chunks):
    (ranking,) = cls(k=4).rank(["Where was the zirconium sand kept?"], tiny_chunks)
    assert ranking.chunk_ids[0] == 5


def test_edi_prefers_the_short_chunk_sharing_the_query_words(tiny_chunks):
    (ranking,) = EDIRetriever(k=len(tiny_chunks)).rank(["copper mine"], tiny_chunks)
    assert ranking.chunk_ids[0] == 3  # "The copper mine closed."
    # the long chunk says "copper mine" twice yet ranks last: its length puts it far from the short query
    assert ranking.chunk_ids[-1] == 4


def test_dps_and_knn_disagree_when_norm_matters():
    chunks = make_chunks(["aligned", "long but off-axis", "other", "fourth"])
    embedder = TableEmbedder({"q": [1, 0], "aligned": [1, 0], "long but off-axis": [3, 3], "other": [0, 1],
                              "fourth": [-1, 0]})
    (dps,) = DPSRetriever(k=1, embedder=embedder).rank(["q"], chunks)
    (knn,) = KNNRetriever(k=1, embedder=embedder).rank(["q"], chunks)
    assert dps.chunk_ids == (1,) and dps.scores == (3.0,)
    assert knn.chunk_ids == (0,) and knn.scores[0] == pytest.approx(1.0)


def test_mmr_skips_the_near_duplicate_that_knn_takes_second(tiny_chunks, embedder):
    question = ["When did the lighthouse keeper light the lamp?"]
    (knn,) = KNNRetriever(k=4, embedder=embedder).rank(question, tiny_chunks)
    (mmr,) = MMRRetriever(k=4, embedder=embedder, fetch_k=8, lambda_mult=0.5).rank(question, tiny_chunks)
    assert set(knn.chunk_ids[:2]) == {0, 1}  # the two near-duplicate chunks lead the plain similarity ranking
    assert mmr.chunk_ids[0] == knn.chunk_ids[0]
    assert mmr.chunk_ids[1] != knn.chunk_ids[1]
    assert mmr.chunk_ids[1] not in (0, 1)


def test_invalid_parameters_fail_fast(embedder):
    with pytest.raises(ValueError, match="k must be >= 1"):
        KNNRetriever(k=0, embedder=embedder)
    with pytest.raises(ValueError, match="fetch_k"):
        MMRRetriever(k=4, fetch_k=2, embedder=embedder)


def squad_like_chunks():
    """The real-text fixture's articles, chunked as a run chunks them, and its punctuation-heavy questions."""
    import json
    from pathlib import Path

    from opi.pipeline import prepare_articles

    rows = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "squad_like.jsonl").open()]
    articles = prepare_articles([r["context"] for r in rows], size=20, overlap=4)  # small chunks: real choices
    chunks = [c for a in articles.values() for c in a.chunks]
    chunks = [dataclasses.replace(c, idx=i) for i, c in enumerate(chunks)]
    return chunks, [r["question"] for r in rows]


def test_bm25_is_langchains_bm25retriever_with_its_defaults():
    from langchain_community.retrievers import BM25Retriever as LCBM25

    from opi.retrievers.langchain import chunk_documents
    from opi.retrievers.lexical import words

    chunks, questions = squad_like_chunks()
    theirs = LCBM25.from_documents(chunk_documents(chunks), k=4)  # LangChain's defaults: whitespace tokens
    ours = BM25Retriever(k=4).rank(questions, chunks)
    for question, ranking in zip(questions, ours):
        assert ranking.chunk_ids == tuple(d.metadata["chunk_idx"] for d in theirs.invoke(question)), question
    # tokenizer=words is a different retriever ("leukosis?" finds "leukosis"), equal to LangChain's given that tokenizer
    by_words = BM25Retriever(k=4, tokenizer="words").rank(questions, chunks)
    assert [r.chunk_ids for r in by_words] != [r.chunk_ids for r in ours]
    lc_words = LCBM25.from_documents(chunk_documents(chunks), k=4, preprocess_func=words)
    for question, ranking in zip(questions, by_words):
        assert ranking.chunk_ids == tuple(d.metadata["chunk_idx"] for d in lc_words.invoke(question)), question


def test_tfidf_matches_langchains(tiny_chunks):
    from langchain_community.retrievers import TFIDFRetriever as LCTFIDF

    question = ["Did the keeper of the lighthouse see the boats in the harbour of the bay?"]
    # a question whose words occur in several chunks, so that scores differ and no tie-breaking rule decides
    lc_tfidf = LangChainRetriever(factory=LCTFIDF.from_documents, k=4)
    assert lc_tfidf.rank(question, tiny_chunks)[0].chunk_ids == TFIDFRetriever(k=4).rank(question, tiny_chunks)[0].chunk_ids


def test_ours_work_as_a_langchain_retriever(tiny_chunks):
    retriever = as_langchain(BM25Retriever(k=2), tiny_chunks)
    documents = retriever.invoke("zirconium sand")
    assert len(documents) == 2
    assert documents[0].metadata["chunk_idx"] == 5


def test_a_langchain_retriever_by_factory_ranks_as_calling_it_directly(tiny_chunks):
    from langchain_community.retrievers import BM25Retriever as LCBM25

    from opi.retrievers.langchain import chunk_documents

    questions = ["Where was the zirconium sand stored?", "Who met monthly in the stone hall?"]
    ours = LangChainRetriever(factory="langchain_community.retrievers.BM25Retriever.from_documents", k=3)
    direct = LCBM25.from_documents(chunk_documents(tiny_chunks), k=3)
    for question, ranking in zip(questions, ours.rank(questions, tiny_chunks)):
        assert ranking.chunk_ids == tuple(d.metadata["chunk_idx"] for d in direct.invoke(question))
    assert len(ranking.chunk_ids) == 3


def test_a_vector_store_retriever_uses_the_runs_embedder(tiny_chunks, embedder):
    store = LangChainRetriever(vectorstore="langchain_core.vectorstores.InMemoryVectorStore", k=4, embedder=embedder)
    (ranking,) = store.rank(["When did the lighthouse keeper light the lamp?"], tiny_chunks)
    (knn,) = KNNRetriever(k=4, embedder=embedder).rank(["When did the lighthouse keeper light the lamp?"], tiny_chunks)
    assert ranking.chunk_ids == knn.chunk_ids  # cosine over the same vectors
