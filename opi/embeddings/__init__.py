"""Embeddings behind LangChain's ``Embeddings`` interface: sentence-transformers models (``local``) and
OpenAI-compatible endpoints (``endpoint``), every vector kept in a persistent store (``store``) and shared within a
process (``shared``); the work a block of code had done (``work``)."""
from opi.embeddings.base import Embedder, EmbeddingInterrupted, unit
from opi.embeddings.local import PACKAGED_MINILM, SentenceEmbedder, resolve_model_path
from opi.embeddings.shared import embedder_for, embedding_counts, resolved, run_store, shared_embedder, use_store
from opi.embeddings.store import EmbeddingStore
from opi.embeddings.work import EmbeddingWork, counting

__all__ = ["Embedder", "EmbeddingInterrupted", "EmbeddingStore", "EmbeddingWork", "PACKAGED_MINILM",
           "SentenceEmbedder", "counting", "embedder_for", "embedding_counts", "resolve_model_path", "resolved",
           "run_store", "shared_embedder", "unit", "use_store"]
