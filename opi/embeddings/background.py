"""Embedding into a store from a process of the lowest priority: work done ahead of need (a race's next round,
``flows.run.embed_ahead``) takes only the CPU time the work of now leaves idle. The process computes what the
store does not hold and writes it there, where the process that needs it later reads it (``Embedder.raw``)."""
from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor

from opi.embeddings.shared import embedder_for
from opi.embeddings.work import counting
from opi.processes import watch_parent
from opi.schemas import EmbeddingConfig


class BackgroundEmbedder:
    """One process of the lowest priority, started at the first texts, embedding a batch at a time."""

    def __init__(self):
        self._pool: ProcessPoolExecutor | None = None

    def embed(self, embedding: EmbeddingConfig, store: str, texts: list[str]) -> dict[str, float]:
        """``texts`` embedded into the store at ``store`` (those it holds are not computed again): the work done
        (``opi.embeddings.work``'s counts)."""
        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=lowest_priority)
        return self._pool.submit(embed_into_store, embedding, store, texts).result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def lowest_priority() -> None:
    """The background process: niced to the lowest priority (the threads it starts inherit it), deaf to the
    terminal's Ctrl-C (its parent stops it), and gone when its parent is."""
    os.nice(19)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch_parent(lambda: os._exit(0))


def embed_into_store(embedding: EmbeddingConfig, store: str, texts: list[str]) -> dict[str, float]:
    with counting() as work:
        embedder_for(embedding, store).raw(texts)
    return work.counts
