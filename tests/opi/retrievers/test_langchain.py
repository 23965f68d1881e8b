"""opi.retrievers.langchain: any LangChain retriever as one of ours (by factory or vector store), and ours as a
LangChain retriever."""
import pytest
from langchain_core.documents import Document

from opi.retrievers import BM25Retriever, KNNRetriever, OracleRetriever
from opi.retrievers.langchain import LangChainRetriever, as_langchain, chunk_documents
from tests.helpers.chunks import make_chunks


def test_chunk_documents_carry_the_chunks_article_and_index():
    (document,) = chunk_documents(make_chunks(["The mill opened."]))
    assert document == Document(page_content="The mill opened.", metadata={"doc_id": "doc", "chunk_idx": 0})


class Backwards:
    """A LangChain-like retriever that returns every document, last first; records how it was made."""

    made: list[dict] = []

    def __init__(self, documents, **kwargs):
        self.documents = documents
        Backwards.made.append(kwargs)

    def invoke(self, question):
        return self.documents[::-1]


def test_a_factory_gets_the_depth_as_k_and_the_options_and_its_order_is_the_ranking():
    Backwards.made.clear()
    retriever = LangChainRetriever(factory=Backwards, k=2, options={"flavour": "plain"})
    (ranking,) = retriever.rank(["q"], make_chunks(["a", "b", "c", "d", "e"]), 3)
    assert Backwards.made == [{"k": 3, "flavour": "plain"}]  # the depth asked for, not the retriever's k
    assert ranking.chunk_ids == (4, 3, 2)  # cut to the depth even when the retriever returns more
    assert ranking.scores == (1.0, 0.5, 1 / 3)  # known only by position


def test_a_langchain_retriever_by_factory_ranks_as_calling_it_directly(tiny_chunks):
    from langchain_community.retrievers import BM25Retriever as LangChainBM25

    questions = ["Where was the zirconium sand stored?", "Who met monthly in the stone hall?"]
    ours = LangChainRetriever(factory="langchain_community.retrievers.BM25Retriever.from_documents")
    direct = LangChainBM25.from_documents(chunk_documents(tiny_chunks), k=3)
    rankings = ours.rank(questions, tiny_chunks, 3)
    for question, ranking in zip(questions, rankings):
        assert ranking.chunk_ids == tuple(d.metadata["chunk_idx"] for d in direct.invoke(question))
    assert [len(r.chunk_ids) for r in rankings] == [3, 3]


def test_a_vector_store_retriever_uses_the_runs_embedder(tiny_chunks, embedder):
    question = ["When did the lighthouse keeper light the lamp?"]
    store = LangChainRetriever(vectorstore="langchain_core.vectorstores.InMemoryVectorStore", embedder=embedder)
    (ranking,) = store.rank(question, tiny_chunks, 4)
    (knn,) = KNNRetriever(embedder=embedder).rank(question, tiny_chunks, 4)
    assert ranking.chunk_ids == knn.chunk_ids  # cosine over the same vectors


@pytest.mark.parametrize("settings", [{}, {"factory": "a.b", "vectorstore": "c.d"}])
def test_exactly_one_of_factory_or_vectorstore(settings):
    with pytest.raises(ValueError, match="give exactly one of factory"):
        LangChainRetriever(**settings)


def test_ours_work_as_a_langchain_retriever_with_their_own_k(tiny_chunks):
    documents = as_langchain(BM25Retriever(k=2), tiny_chunks).invoke("zirconium sand")
    assert [d.metadata["chunk_idx"] for d in documents][:1] == [5] and len(documents) == 2
    assert documents[0].page_content == tiny_chunks[5].text


def test_the_oracle_cannot_serve_langchain_without_evidence(tiny_chunks):
    with pytest.raises(ValueError, match="needs their gold evidence"):
        as_langchain(OracleRetriever(), tiny_chunks).invoke("a question")
