"""A team's own index, evaluated in place (``retriever=vectorstore``): an existing collection of a vector database,
queried read-only through LangChain's integration for it (Chroma: ``langchain-chroma``; Qdrant: ``langchain-qdrant``).

The collection's documents were made by the team's pipeline (its splitter, its embedding model), so for a
configuration with a store the article's chunks *are* the store's documents: each located in the articles
(``opi.articles.store_articles``) and widened to whole sentences as OPI's chunks are; BM25 or kNN fused with the
store (``A-``/``S-``) rank those same documents. A question's ranking is the store's own ``similarity_search``
(its ids and order), mapped to those chunks; in article scope the store's answers from other articles are skipped
(asked deeper, up to ``fetch_limit``), in corpus scope they count against ``right_article``.

Nothing is ever written to the store: the client reads (``get``/``scroll``, ``count``, the collection's settings)
and searches. The query embedding (``embedding``, OPI's, local or an endpoint) must be the collection's model: a
different dimension is refused before any example is evaluated, as are an unreachable server and a missing
collection (``VectorStoreUnavailable``: one line).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Optional
from urllib.parse import urlparse

from opi.chunking import Chunk
from opi.retrievers.base import Ranking, Retriever, VectorStoreUnavailable
from opi.schemas import EmbeddingOverride

BACKENDS = ("chroma", "qdrant")
CLIENTS = "vector store clients"  # the kind they are kept under in a process (``opi.memory``)
PAGE = 1000  # documents read per request


@dataclass
class VectorStoreRetriever(Retriever):
    name: str = "vectorstore"
    backend: str = "chroma"  # chroma | qdrant
    collection: Optional[str] = None  # the collection's name (required)
    url: Optional[str] = None  # a running server: http://host:port
    path: Optional[str] = None  # or a local folder (Chroma's persistent client, Qdrant's local mode)
    vector_name: str = ""  # Qdrant: the collection's named dense vector ('' for its one unnamed vector)
    text_field: str = "page_content"  # Qdrant: the payload key holding a document's text (LangChain's)
    fetch_limit: int = 1000  # article scope: asked at most this deep for the article's own documents
    embedding: EmbeddingOverride = field(default_factory=EmbeddingOverride)  # the collection's model (unset: the run's)

    live: ClassVar[bool] = True  # its rankings come from a service whose content can change: never kept

    def __post_init__(self):
        super().__post_init__()
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if not self.collection:
            raise ValueError("collection: the name of the collection to evaluate is required")
        if (self.url is None) == (self.path is None):
            raise ValueError("give exactly one of url (a running server) or path (a local folder)")
        if self.fetch_limit < 1:
            raise ValueError(f"fetch_limit must be >= 1, got {self.fetch_limit}")
        if not self.text_field:
            raise ValueError("text_field: the payload key holding a document's text is required")

    @property
    def where(self) -> str:
        return f"{self.backend} {self.url or self.path}, collection {self.collection!r}"

    def client(self) -> "StoreClient":
        """The store's client, one per store in a process (Qdrant's local mode allows one a folder): reading and
        searching only."""
        from opi.memory import MEMORY

        return MEMORY.recall(CLIENTS, self._client_key(),
                             lambda: (ChromaClient if self.backend == "chroma" else QdrantClient)(self))

    def _client_key(self) -> tuple:
        return self.backend, self.url, self.path, self.collection, self.vector_name, self.text_field

    def check(self, embedder) -> dict[str, Any]:
        """What the run records of the store (collection, size, server version), once it is known to be reachable,
        to hold the collection, and to have vectors of the query embedding's dimension; else
        ``VectorStoreUnavailable`` naming the problem."""
        if self.path is not None and not Path(self.path).expanduser().is_dir():  # its client would make one
            raise VectorStoreUnavailable(f"retriever=vectorstore: {self.backend} path {self.path}: no such folder")
        client = self.client()
        try:
            count = client.count()
            if count == 0:
                raise client.unavailable("holds no documents: nothing to retrieve")
            stored = client.dimension()
            query = len(embedder.embed_query("dimension check"))
            if stored is not None and stored != query:
                raise client.unavailable(f"holds {stored}-dimensional vectors, the query embedding gives {query}: "
                                         "set retriever.embedding to the model the collection was filled with")
            return {"collection": self.collection, "documents": count, "server": client.version()}
        finally:
            if self.backend == "qdrant" and self.path is not None:
                # Qdrant's local mode lets one client open a folder: a parallel launcher's jobs open their own
                from opi.memory import MEMORY

                client.close()
                MEMORY.discard(CLIENTS, self._client_key())

    def documents(self) -> list[tuple[str, str]]:
        """Every document of the collection as (id, text)."""
        return self.client().documents()

    def rank(self, questions: list[str], chunks: list[Chunk], depth: int) -> list[Ranking]:
        place = {c.source: i for i, c in enumerate(chunks) if c.source is not None}
        client, rankings = self.client(), []
        for question in questions:
            k, found = depth, []
            while True:
                hits = client.search(question, k, self._require_embedder())
                found = [(place[source], score) for source, score in hits if source in place]
                if len(found) >= depth or len(hits) < k or k >= self.fetch_limit:
                    break
                k = min(k * 4, self.fetch_limit)
            found = found[:depth]
            rankings.append(Ranking(tuple(i for i, _ in found), tuple(score for _, score in found)))
        return rankings


class StoreClient:
    def __init__(self, retriever: VectorStoreRetriever):
        self.retriever = retriever

    def unavailable(self, what: str, err: BaseException | None = None) -> VectorStoreUnavailable:
        detail = f" ({type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''})" if err else ""
        return VectorStoreUnavailable(f"retriever=vectorstore: the {self.retriever.where}: {what}{detail}")

    def close(self) -> None:
        pass


class ChromaClient(StoreClient):
    def __init__(self, retriever: VectorStoreRetriever):
        super().__init__(retriever)
        import chromadb

        try:
            if retriever.url is not None:
                parsed = urlparse(retriever.url)
                self.api = chromadb.HttpClient(host=parsed.hostname or "localhost", port=parsed.port or 8000,
                                               ssl=parsed.scheme == "https")
            else:
                self.api = chromadb.PersistentClient(path=retriever.path)
            self.server = self.api.get_version()
        except Exception as err:  # noqa: BLE001 - any failure to reach it is the one line
            raise self.unavailable("cannot be reached", err) from None
        try:
            self.collection = self.api.get_collection(retriever.collection)
        except Exception as err:  # noqa: BLE001
            names = ", ".join(sorted(c.name for c in self.api.list_collections())[:10]) or "none"
            raise self.unavailable(f"has no such collection (it has: {names})", err) from None
        self._store = None

    def version(self) -> str:
        return f"Chroma {self.server}"

    def count(self) -> int:
        return self.collection.count()

    def dimension(self) -> int | None:
        got = self.collection.get(limit=1, include=["embeddings"])
        vectors = got.get("embeddings")
        return len(vectors[0]) if vectors is not None and len(vectors) else None

    def documents(self) -> list[tuple[str, str]]:
        found, offset = [], 0
        while True:
            page = self.collection.get(limit=PAGE, offset=offset, include=["documents"])
            found += [(str(i), text or "") for i, text in zip(page["ids"], page["documents"])]
            if len(page["ids"]) < PAGE:
                return found
            offset += PAGE

    def search(self, question: str, k: int, embedder) -> list[tuple[str, float]]:
        if self._store is None:
            from langchain_chroma import Chroma

            self._store = Chroma(collection_name=self.retriever.collection, client=self.api,
                                 embedding_function=embedder, create_collection_if_not_exists=False)
        # Chroma returns distances (lower is nearer): negated, so that a higher score is better
        return [(str(d.id), -float(distance)) for d, distance in self._store.similarity_search_with_score(question, k)]


class QdrantClient(StoreClient):
    def __init__(self, retriever: VectorStoreRetriever):
        super().__init__(retriever)
        from qdrant_client import QdrantClient as Client

        try:
            self.api = Client(url=retriever.url) if retriever.url is not None else Client(path=retriever.path)
            exists = self.api.collection_exists(retriever.collection)
        except Exception as err:  # noqa: BLE001
            if retriever.path is not None and "already accessed by another instance" in str(err):
                raise self.unavailable(
                    "is open in another process (Qdrant's local mode allows one a folder: another program, or "
                    "another job of a parallel launcher): serve it with a Qdrant server (retriever.url), or run "
                    "the sweep's jobs one at a time (hydra/launcher=basic)") from None
            raise self.unavailable("cannot be reached", err) from None
        if not exists:
            names = ", ".join(sorted(c.name for c in self.api.get_collections().collections)[:10]) or "none"
            raise self.unavailable(f"has no such collection (it has: {names})")
        self.info = self.api.get_collection(retriever.collection)
        vectors = self.info.config.params.vectors
        if isinstance(vectors, dict):
            if retriever.vector_name not in vectors:
                raise self.unavailable(f"has no dense vector named {retriever.vector_name!r} (it has: "
                                       f"{', '.join(vectors)}): set retriever.vector_name")
            vectors = vectors[retriever.vector_name]
        self.vectors = vectors
        self._store = None

    def version(self) -> str:
        if self.retriever.url is None:
            from importlib.metadata import version

            return f"Qdrant local mode (qdrant-client {version('qdrant-client')})"
        return f"Qdrant {self.api.info().version}"

    def count(self) -> int:
        return self.api.count(self.retriever.collection, exact=True).count

    def close(self) -> None:
        self.api.close()

    def dimension(self) -> int | None:
        return self.vectors.size

    def documents(self) -> list[tuple[str, str]]:
        found, offset = [], None
        while True:
            points, offset = self.api.scroll(self.retriever.collection, limit=PAGE, offset=offset, with_payload=True,
                                             with_vectors=False)
            found += [(str(p.id), str((p.payload or {}).get(self.retriever.text_field) or "")) for p in points]
            if offset is None:
                return found

    def search(self, question: str, k: int, embedder) -> list[tuple[str, float]]:
        if self._store is None:
            from langchain_qdrant import QdrantVectorStore

            self._store = QdrantVectorStore(client=self.api, collection_name=self.retriever.collection,
                                            embedding=embedder, vector_name=self.retriever.vector_name,
                                            content_payload_key=self.retriever.text_field,
                                            distance=self.vectors.distance, validate_collection_config=False)
        return [(str(d.metadata["_id"]), float(score))
                for d, score in self._store.similarity_search_with_score(question, k=k)]
