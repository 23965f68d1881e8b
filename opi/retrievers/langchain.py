"""Bridges to LangChain: wrap any LangChain retriever into our interface, and expose ours as a ``BaseRetriever``."""
from __future__ import annotations

from typing import Any, Callable

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from opi.chunking import Chunk
from opi.retrievers.base import Ranking, Retriever


def chunk_documents(chunks: list[Chunk]) -> list[Document]:
    return [Document(page_content=c.text, metadata={"doc_id": c.doc_id, "chunk_idx": c.idx}) for c in chunks]


class LangChainRetriever(Retriever):
    """Any LangChain retriever built per article by ``factory(documents)``; rank = order it returns, cut to k.

    Example factory: ``functools.partial(langchain_community.retrievers.BM25Retriever.from_documents, k=4)``.
    """

    def __init__(self, factory: Callable[[list[Document]], BaseRetriever], k: int = 4, embedder=None,
                 name: str = "langchain"):
        super().__init__(k, embedder)
        self.factory = factory
        self.name = name

    def rank(self, questions, chunks):
        retriever = self.factory(chunk_documents(chunks))
        rankings = []
        for question in questions:
            ids = tuple(d.metadata["chunk_idx"] for d in retriever.invoke(question))[: self.k]
            rankings.append(Ranking(ids, tuple(1.0 / (r + 1) for r in range(len(ids)))))
        return rankings


class OPIRetriever(BaseRetriever):
    """One of our retrievers over one article's chunks, usable wherever LangChain expects a retriever."""

    retriever: Any
    chunks: list

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        (ranking,) = self.retriever.rank([query], self.chunks)
        documents = chunk_documents(self.chunks)
        return [documents[i] for i in ranking.chunk_ids]


def as_langchain(retriever: Retriever, chunks: list[Chunk]) -> OPIRetriever:
    return OPIRetriever(retriever=retriever, chunks=chunks)
