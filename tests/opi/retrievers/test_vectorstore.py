"""opi.retrievers.vectorstore: a collection filled by another pipeline (its own splitter), evaluated in place and
read-only; its documents located in the articles; rankings equal to the store's own similarity search."""
import hashlib

import pytest

from opi.articles import corpus_view, store_articles
from opi.chunking import document_id
from opi.retrievers.base import VectorStoreUnavailable
from opi.retrievers.vectorstore import VectorStoreRetriever

MILL = ("The mill opened in 1850 beside the river. It ground wheat for three villages.\n\n"
        "A flood in 1901 silted up the race. The mill closed that winter and never reopened.")
QUAY = ("Ships docked at the quay every spring. Sailors sang at night in the harbour inn.\n\n"
        "The harbour master kept a ledger of every cargo. Salt and wool were the main trade.")
@pytest.fixture(autouse=True)
def _clients_closed():
    """The store clients a test made, closed at its end (Qdrant's local mode holds its folder until then)."""
    from opi.memory import MEMORY

    with MEMORY.isolated("vector store clients"):
        yield
        for client in MEMORY.values("vector store clients"):
            getattr(client.api, "close", lambda: None)()


DOCUMENTS = [  # another splitter's pieces: a line break lost, case changed, and one piece of no article
    ("d1", "The mill opened in 1850 beside the river."), ("d2", "It ground wheat for three villages. A flood"),
    ("d3", "in 1901 silted up the race."), ("d4", "the mill closed that winter and never reopened."),
    ("d5", "Ships docked at the quay every spring."), ("d6", "Sailors sang at night in the harbour inn."),
    ("d7", "The harbour master kept a ledger of every cargo. Salt and wool were the main trade."),
    ("d8", "A paragraph from a document that is not in the data."),
]


def test_the_stores_documents_become_the_articles_chunks_widened_to_whole_sentences():
    located = store_articles([MILL, QUAY, MILL], DOCUMENTS)
    assert (located.documents, located.not_found) == (8, 1)
    mill = located.articles[document_id(MILL)]
    assert [c.source for c in mill.chunks] == ["d1", "d2", "d3", "d4"]  # in the article's order
    d2 = mill.chunks[1]
    assert d2.text == "It ground wheat for three villages.\n\nA flood"  # found with whitespace ignored
    assert [mill.sentences[i].text for i in d2.sentence_ids] == [  # widened to the sentences it touches
        "It ground wheat for three villages.", "A flood in 1901 silted up the race."]
    assert mill.chunks[3].text == "The mill closed that winter and never reopened."  # case ignored
    corpus = corpus_view(located.articles)[document_id(QUAY)]
    assert [c.source for c in corpus.chunks] == ["d1", "d2", "d3", "d4", "d5", "d6", "d7"]


@pytest.fixture
def qdrant_collection(tmp_path, embedder):
    """A Qdrant collection (local mode) filled as a team would: the documents and their vectors."""
    from qdrant_client import QdrantClient, models

    path = str(tmp_path / "qdrant")
    client = QdrantClient(path=path)
    vectors = embedder.embed_documents([text for _, text in DOCUMENTS])
    client.create_collection("team", vectors_config=models.VectorParams(size=len(vectors[0]),
                                                                         distance=models.Distance.COSINE))
    client.upsert("team", points=[models.PointStruct(id=i + 1, vector=v, payload={"page_content": text,
                                                                                   "metadata": {"name": name}})
                                  for i, ((name, text), v) in enumerate(zip(DOCUMENTS, vectors))])
    client.close()
    return path


def ids_checksum(path: str) -> tuple[int, str]:
    from qdrant_client import QdrantClient

    client = QdrantClient(path=path)
    points, _ = client.scroll("team", limit=100, with_payload=True)
    client.close()
    return len(points), hashlib.sha256(repr(sorted((p.id, p.payload["page_content"]) for p in points)).encode()
                                       ).hexdigest()


def test_a_qdrant_collection_ranks_as_its_own_similarity_search_and_is_left_unchanged(qdrant_collection, embedder):
    from langchain_qdrant import QdrantVectorStore

    before = ids_checksum(qdrant_collection)
    retriever = VectorStoreRetriever(backend="qdrant", path=qdrant_collection, collection="team", embedder=embedder)
    assert retriever.check(embedder)["documents"] == 8
    located = store_articles([MILL, QUAY], retriever.documents())
    corpus = corpus_view(located.articles)[document_id(MILL)]
    questions = ["When did the mill close?", "What did sailors do at night?", "What was traded?"]
    rankings = retriever.rank(questions, list(corpus.chunks), 3)
    direct = QdrantVectorStore(client=retriever.client().api, collection_name="team", embedding=embedder)
    for question, ranking in zip(questions, rankings):
        expected = [str(d.metadata["_id"]) for d in direct.similarity_search(question, k=3)]
        got = [corpus.chunks[i].source for i in ranking.chunk_ids]
        assert got == [e for e in expected if e != "8"][:len(got)] and len(got) == 3, question
    # within one article: only its own documents, asked deeper for them
    mill = located.articles[document_id(MILL)]
    (own,) = retriever.rank(["What did sailors do at night?"], list(mill.chunks), 2)
    assert {mill.chunks[i].source for i in own.chunk_ids} <= {"1", "2", "3", "4"} and len(own.chunk_ids) == 2
    retriever.client().api.close()
    assert ids_checksum(qdrant_collection) == before  # (the client is closed again at the end: a no-op)


def test_a_missing_collection_another_dimension_or_no_server_is_one_clear_problem(qdrant_collection, embedder,
                                                                                    tmp_path):
    with pytest.raises(VectorStoreUnavailable, match="has no such collection \\(it has: team\\)"):
        VectorStoreRetriever(backend="qdrant", path=qdrant_collection, collection="teams").client()

    class Wider:
        def embed_query(self, text):
            return [0.1] * 768

    with pytest.raises(VectorStoreUnavailable, match="holds 384-dimensional vectors, the query embedding gives 768"):
        VectorStoreRetriever(backend="qdrant", path=qdrant_collection, collection="team").check(Wider())
    with pytest.raises(VectorStoreUnavailable, match="chroma http://127.0.0.1:9, collection 'team': cannot be "
                                                     "reached"):
        VectorStoreRetriever(backend="chroma", url="http://127.0.0.1:9", collection="team").client()
    with pytest.raises(ValueError, match="exactly one of url"):
        VectorStoreRetriever(collection="team")


def test_a_chroma_folder_ranks_as_its_own_similarity_search(tmp_path, embedder):
    import chromadb
    from langchain_chroma import Chroma

    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    collection = client.create_collection("team", metadata={"hnsw:space": "cosine"})
    collection.add(ids=[name for name, _ in DOCUMENTS], documents=[text for _, text in DOCUMENTS],
                   embeddings=embedder.embed_documents([text for _, text in DOCUMENTS]))
    retriever = VectorStoreRetriever(backend="chroma", path=str(tmp_path / "chroma"), collection="team",
                                     embedder=embedder)
    facts = retriever.check(embedder)
    assert facts["documents"] == 8 and facts["server"].startswith("Chroma ")
    corpus = corpus_view(store_articles([MILL, QUAY], retriever.documents()).articles)[document_id(MILL)]
    direct = Chroma(collection_name="team", client=client, embedding_function=embedder,
                    create_collection_if_not_exists=False)
    for question in ["When did the mill close?", "What was traded?"]:
        (ranking,) = retriever.rank([question], list(corpus.chunks), 3)
        expected = [d.id for d in direct.similarity_search(question, k=4) if d.id != "d8"][:3]
        assert [corpus.chunks[i].source for i in ranking.chunk_ids] == expected
    assert collection.count() == 8


def test_documents_without_text_are_counted_and_never_located():
    located = store_articles([MILL], [("d1", "The mill opened in 1850 beside the river."), ("e1", ""), ("e2", "  ")])
    assert (located.documents, located.not_found, located.without_text) == (3, 2, 2)
    assert located.without_documents == 0
    assert store_articles([MILL, QUAY], DOCUMENTS[:1]).without_documents == 1  # the quay has none of them


def test_an_empty_collection_or_a_missing_folder_is_one_problem_and_nothing_is_created(tmp_path, embedder):
    from qdrant_client import QdrantClient, models

    missing = tmp_path / "nowhere"
    for backend in ("chroma", "qdrant"):
        with pytest.raises(VectorStoreUnavailable, match=f"{backend} path {missing}: no such folder"):
            VectorStoreRetriever(backend=backend, path=str(missing), collection="team").check(embedder)
    assert not missing.exists()
    client = QdrantClient(path=str(tmp_path / "empty"))
    client.create_collection("team", vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE))
    client.close()
    with pytest.raises(VectorStoreUnavailable, match="collection 'team': holds no documents: nothing to retrieve"):
        VectorStoreRetriever(backend="qdrant", path=str(tmp_path / "empty"), collection="team").check(embedder)


def test_a_qdrant_folder_is_released_after_its_check_and_its_text_read_under_the_payload_key_named(tmp_path,
                                                                                                      embedder):
    from qdrant_client import QdrantClient, models

    path = str(tmp_path / "qdrant")
    client = QdrantClient(path=path)
    vectors = embedder.embed_documents([text for _, text in DOCUMENTS])
    client.create_collection("team", vectors_config=models.VectorParams(size=len(vectors[0]),
                                                                         distance=models.Distance.COSINE))
    client.upsert("team", points=[models.PointStruct(id=i + 1, vector=v, payload={"text": text})
                                  for i, ((_, text), v) in enumerate(zip(DOCUMENTS, vectors))])
    client.close()
    default = VectorStoreRetriever(backend="qdrant", path=path, collection="team", embedder=embedder)
    assert default.check(embedder)["documents"] == 8
    other = QdrantClient(path=path)  # the check left the folder to a parallel launcher's job
    other.close()
    assert store_articles([MILL, QUAY], default.documents()).without_text == 8  # LangChain's page_content: none
    default.client().close()
    named = VectorStoreRetriever(backend="qdrant", path=path, collection="team", text_field="text", embedder=embedder)
    located = store_articles([MILL, QUAY], named.documents())
    assert (located.not_found, located.without_text) == (1, 0)
    corpus = corpus_view(located.articles)[document_id(MILL)]
    (ranking,) = named.rank(["When did the mill close?"], list(corpus.chunks), 2)
    assert len(ranking.chunk_ids) == 2
    with pytest.raises(VectorStoreUnavailable, match="is open in another process"):  # a second client of it
        VectorStoreRetriever(backend="qdrant", path=path, collection="team", vector_name="x").client()
