"""Bridges to LangChain: any LangChain retriever as one of ours (``retriever=langchain``), and ours as a LangChain
``BaseRetriever`` (``as_langchain``). LangChain is imported where it is used: every command reads this module for
the option's settings, and most never call LangChain (~0.3 s)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from opi.chunking import Chunk
from opi.retrievers.base import Ranking, Retriever
from opi.schemas import EmbeddingOverride

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from opi.retrievers.langchain_bridge import OPIRetriever


def chunk_documents(chunks: list[Chunk]) -> list[Document]:
    from langchain_core.documents import Document

    return [Document(page_content=c.text, metadata={"doc_id": c.doc_id, "chunk_idx": c.idx}) for c in chunks]


@dataclass
class LangChainRetriever(Retriever):
    """A LangChain retriever built over each article's chunks; its ranking is the order it returns, cut to k.

    Give either ``factory``, a callable (or its dotted path) taking the chunk ``Document``s and returning a
    retriever, e.g. ``langchain_community.retrievers.BM25Retriever.from_documents`` (called with ``k`` and
    ``options``); or ``vectorstore``, a ``VectorStore`` class (or its dotted path) filled with
    ``from_documents(documents, embedding=<the run's embedder>)`` and queried through ``as_retriever(search_type,
    search_kwargs={"k": k, **options})``, e.g. ``langchain_core.vectorstores.InMemoryVectorStore``.
    """

    name: str = "LangChain"
    factory: Optional[str] = None
    vectorstore: Optional[str] = None
    search_type: str = "similarity"
    options: dict[str, Any] = field(default_factory=dict)
    embedding: EmbeddingOverride = field(default_factory=EmbeddingOverride)  # a vector store's (unset: the run's)

    def __post_init__(self):
        super().__post_init__()
        if (self.factory is None) == (self.vectorstore is None):
            raise ValueError("give exactly one of factory (a retriever factory) or vectorstore (a VectorStore class)")

    def build(self, documents: list[Document], depth: int) -> BaseRetriever:
        from hydra.utils import get_object

        def resolve(target):
            return get_object(target) if isinstance(target, str) else target

        if self.factory is not None:
            return resolve(self.factory)(documents, **{"k": depth, **self.options})
        store = resolve(self.vectorstore).from_documents(documents, embedding=self._require_embedder())
        return store.as_retriever(search_type=self.search_type, search_kwargs={"k": depth, **self.options})

    def rank(self, questions, chunks, depth):
        retriever = self.build(chunk_documents(chunks), depth)
        return [Ranking.by_position([d.metadata["chunk_idx"] for d in retriever.invoke(question)][:depth])
                for question in questions]


def as_langchain(retriever: Retriever, chunks: list[Chunk]) -> OPIRetriever:
    """``retriever`` over one article's ``chunks``, usable wherever LangChain expects a retriever."""
    from opi.retrievers.langchain_bridge import OPIRetriever

    return OPIRetriever(retriever=retriever, chunks=chunks)
