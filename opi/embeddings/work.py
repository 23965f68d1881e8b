"""The embedding work done inside a block (``counting``), whatever else the process does at the same time: a stage
task opens one around its body, and every embedder that serves texts to code in that block (in its thread, or in a
thread started with a copy of its context) adds what it did to it. Two blocks open at once in two threads each see
only their own work, though they share one embedder per model."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Mapping


class EmbeddingWork:
    """What embedders did for a block, summed by metric name: ``texts_embedded`` (computed by a model or sent to
    an endpoint), ``texts_from_embedding_store``, ``texts_from_memory`` (the process had them), and an endpoint's
    usage (``embedding_calls``, ``embedding_prompt_tokens``, ``embedding_cost_usd``, ...)."""

    def __init__(self):
        self.counts: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, counts: Mapping[str, float]) -> None:
        with self._lock:
            for name, value in counts.items():
                self.counts[name] = self.counts.get(name, 0.0) + float(value)


_CURRENT: ContextVar[EmbeddingWork | None] = ContextVar("opi_embedding_work", default=None)


@contextmanager
def counting() -> Iterator[EmbeddingWork]:
    """A fresh count of the embedding work done in the block (an inner block counts its own, not the outer's)."""
    work = EmbeddingWork()
    token = _CURRENT.set(work)
    try:
        yield work
    finally:
        _CURRENT.reset(token)


def record(counts: Mapping[str, float]) -> None:
    """Adds an embedder's work to the innermost open count, if any."""
    work = _CURRENT.get()
    if work is not None:
        work.add(counts)
