"""Ours as a LangChain ``BaseRetriever`` (``opi.retrievers.langchain.as_langchain`` builds it): a module of its
own because the class needs LangChain when it is defined."""
from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from opi.retrievers.langchain import chunk_documents


class OPIRetriever(BaseRetriever):
    """One of our retrievers over one article's chunks, usable wherever LangChain expects a retriever."""

    retriever: Any
    chunks: list

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        (ranking,) = self.retriever.rank([query], self.chunks, self.retriever.k)
        documents = chunk_documents(self.chunks)
        return [documents[i] for i in ranking.chunk_ids]
