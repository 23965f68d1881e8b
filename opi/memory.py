"""What a process keeps between the configurations it runs, in one place. A sweep's jobs run one after another in
one process, so one chunking of the articles, one fit of the classifier and one loaded model serve them all. Each
kind of thing kept is named here with its bound (the oldest entry of a kind is forgotten first); nothing outlives
the process. The stage cache (``paths.cache_dir``), the LLM call cache and the embedding store are what outlives
it."""
from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, Hashable, Iterator, TypeVar

T = TypeVar("T")

BOUNDS = {
    "chunked articles": 4,  # a dataset's chunkings (22 MB each at 2,400 rows): a sweep over chunking alternates them
    "fitted classifiers": 2,  # a sweep's cross-fitted and plainly fitted one
    "embedders": 32,  # one per embedding model and store (its vectors in memory, its counts: embedding_counts)
    "embedding stores": 8,  # one connection per store file
    "chat servers": 2,  # local LLM servers started for an llm= config
    "checked stores": 256,  # a store file (path, size, time) found intact: read once per process
    "checked experiments": 64,  # an MLflow experiment whose orphaned runs were closed
    "answering tracking servers": 16,  # an http(s) tracking server that answered this process
    "said": 256,  # a notice said once per process, not once per job
    "vector store clients": 4,  # one per store a process asks (Qdrant's local mode allows one client a folder)
    "composed jobs": 1024,  # a sweep's jobs as its preflight composed them: the sweeper launches them, not again
}


class Memory:
    """Named kinds of kept values, each bounded (``BOUNDS``) and guarded by a lock of its own (making a value may
    take long: loading a model; other kinds are not held up)."""

    def __init__(self, bounds: dict[str, int]):
        self.bounds = dict(bounds)
        self._kinds: dict[str, OrderedDict] = {kind: OrderedDict() for kind in bounds}
        self._locks = {kind: threading.RLock() for kind in bounds}

    def recall(self, kind: str, key: Hashable, make: Callable[[], T]) -> T:
        """The value kept under ``key``, or ``make()`` kept and returned."""
        entries = self._kinds[kind]
        with self._locks[kind]:
            if key in entries:
                entries.move_to_end(key)
                return entries[key]
            value = make()
            entries[key] = value
            while len(entries) > self.bounds[kind]:
                entries.popitem(last=False)
            return value

    def holds(self, kind: str, key: Hashable) -> bool:
        with self._locks[kind]:
            return key in self._kinds[kind]

    def get(self, kind: str, key: Hashable) -> object | None:
        """The value kept under ``key``, or None; nothing is made or kept."""
        with self._locks[kind]:
            return self._kinds[kind].get(key)

    def first_time(self, kind: str, key: Hashable) -> bool:
        """True the first time ``key`` is seen (then kept): for what is done or said once per process."""
        with self._locks[kind]:
            if key in self._kinds[kind]:
                return False
            self.recall(kind, key, lambda: True)
            return True

    @contextmanager
    def isolated(self, kind: str) -> Iterator[None]:
        """While in the block, ``kind`` starts empty; after it, what was kept before is back (for tests that put
        stand-ins in, without making others load their models again)."""
        with self._locks[kind]:
            kept, self._kinds[kind] = self._kinds[kind], OrderedDict()
        try:
            yield
        finally:
            with self._locks[kind]:
                self._kinds[kind] = kept

    def forget(self, kind: str) -> None:
        with self._locks[kind]:
            self._kinds[kind].clear()

    def discard(self, kind: str, key: Hashable) -> None:
        with self._locks[kind]:
            self._kinds[kind].pop(key, None)

    def values(self, kind: str) -> list:
        with self._locks[kind]:
            return list(self._kinds[kind].values())

    def sizes(self) -> dict[str, int]:
        return {kind: len(entries) for kind, entries in self._kinds.items()}


MEMORY = Memory(BOUNDS)
