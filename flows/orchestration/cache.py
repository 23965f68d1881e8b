"""The stage cache: task results kept under ``paths.cache_dir``, keyed by content.

- ``hashed``: a big input many task calls receive (the examples, the article texts, the chunked articles), marked
  with its content hash, taken once instead of at every call.
- ``key_of``: any task input as plain data for a key: hashed inputs by their hash, components and configs by their
  class and settings (run-time resources left out, and the settings a component says its result does not depend
  on: a retriever's ``k`` is applied after ranking).
- ``cached``: a task with that key (``ContentInputs``), plus the task's source and the ``code`` argument every task
  takes (``flows.orchestration.code``), persisted under the cache folder with SERIALIZABLE isolation and file locks:
  when two processes need the same result, one computes it and the other waits and reads it.
- ``read_kept`` / ``keep``: a whole configuration's result under one key; ``StageCalls`` calls stages as they are
  declared, counts hits and misses, and takes the work each computed call measured (``flows.orchestration.work``).
"""
from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect.cache_policies import TASK_SOURCE, CachePolicy, Inputs
from prefect.results import ResultStore
from prefect.utilities.annotations import quote
from prefect.utilities.hashing import hash_objects

from flows.orchestration.cache_files import CacheFileSystem
from flows.orchestration.locks import FileLockManager
from flows.orchestration.prefect_adapter import was_cached, with_result_storage
from flows.orchestration.stage import Stage
from flows.orchestration.work import RunWork
from opi.components import RESOURCES, target_of


class HashedList(list):
    """A list marked with the hash of its content (``hashed``)."""

    content_hash: str


class HashedDict(dict):
    """A dict marked with the hash of its content (``hashed``)."""

    content_hash: str


def hashed(value: list | dict, content_hash: str | None = None) -> HashedList | HashedDict:
    """``value`` marked with its content hash (``content_hash`` when the caller knows it from what it was made of)."""
    marked = HashedDict(value) if isinstance(value, dict) else HashedList(value)
    marked.content_hash = content_hash or plain_hash(marked)
    return marked


def plain_hash(value: list | dict) -> str:
    return hash_objects(dict(value) if isinstance(value, dict) else list(value), raise_on_failure=True)


def key_of(value: Any) -> Any:
    """``value`` as plain data for a cache key. A runner that rebuilds values on the way (Dask copies collections)
    loses the hash attribute: it is then taken again, so keys agree."""
    if isinstance(value, (HashedList, HashedDict)):
        return ("content-hash", getattr(value, "content_hash", None) or plain_hash(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        neutral = (*RESOURCES, *getattr(type(value), "excluded_from_keys", ()))
        return {"_target_": target_of(type(value)),
                **{f.name: key_of(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name not in neutral}}
    if isinstance(value, dict):
        return {k: key_of(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [key_of(v) for v in value]
    return value


@dataclass
class ContentInputs(CachePolicy):
    """Prefect's INPUTS policy over ``key_of`` the inputs, but where the embedding store is (vectors are the same
    whichever store keeps them). Not a subclass of Inputs: a compound policy replaces every Inputs member by a
    plain one."""

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs):
        return Inputs().compute_key(task_ctx, {name: key_of(value) for name, value in (inputs or {}).items()
                                               if name != "embedding_store"}, flow_parameters, **kwargs)


def cache_layout(cache_dir: str) -> tuple[CacheFileSystem, CacheFileSystem, FileLockManager]:
    """Where the cache keeps results, their keys (metadata) and its locks: one layout for tasks and kept results."""
    root = Path(cache_dir).resolve()
    return (CacheFileSystem(basepath=str(root / "results")),
            CacheFileSystem(basepath=str(root / "keys"), results=str(root / "results")),
            FileLockManager(root / "locks"))


def cached(task_fn, cache_dir: str):
    """The task (a stage's: ``Stage.task``) with its cache and result storage under ``cache_dir``."""
    results, keys, locks = cache_layout(cache_dir)
    configured = task_fn.with_options(
        cache_policy=(ContentInputs() + TASK_SOURCE).configure(key_storage=keys, lock_manager=locks,
                                                               isolation_level="SERIALIZABLE"),
        persist_result=True)
    return with_result_storage(configured, results)


def result_store(cache_dir: str) -> ResultStore:
    """The stage cache's store, for results kept without a task."""
    results, keys, locks = cache_layout(cache_dir)
    return ResultStore(result_storage=results, metadata_storage=keys, lock_manager=locks)


def read_kept(cache_dir: str, key: str) -> Any | None:
    """A result kept under ``key``, or None (also for one left unreadable: it is computed again and replaced).
    Waits while another process is writing it."""
    store = result_store(cache_dir)
    if not store.exists(key):
        return None
    try:
        return store.read(key).result
    except Exception as err:  # damaged after the existence check: computed again, then replaced
        cache_layout(cache_dir)[1].forget(key, err)
        return None


def keep(cache_dir: str, key: str, value: Any) -> None:
    """Keep ``value`` under ``key``, written under its lock (same key, same inputs: any writer's value will do)."""
    store, holder = result_store(cache_dir), uuid.uuid4().hex
    store.acquire_lock(key, holder=holder)
    try:
        store.write(key=key, obj=value, holder=holder)
    finally:
        store.release_lock(key, holder=holder)


class StageCalls:
    """Calls stages (``flows.orchestration.stage``) through the cache as their declarations say, counting hits,
    misses and seconds per stage group, and the work the calls computed in this run measured (``work``). The
    stages keep their vectors in ``embedding_store``."""

    def __init__(self, cache_dir: str, quote_inputs: bool = True, embedding_store: str | None = None):
        self.cache_dir, self.embedding_store = cache_dir, embedding_store
        self.work = RunWork()
        self.hits = self.misses = 0
        self.seconds: dict[str, float] = {}
        self.computed: dict[str, int] = {}  # per stage group: calls computed (not read from the cache)
        # quote(): our inputs are plain data, never futures, so Prefect need not walk them (seconds per warm grid).
        # Not on Dask, whose graphs read the annotation (a tuple) as a task.
        self.wrap = quote if quote_inputs else (lambda value: value)

    def call_many(self, stage: Stage, *calls: tuple) -> list:
        """Submit the calls to the flow's task runner together, then collect their results in order."""
        started = time.perf_counter()
        submitted = []
        for args in calls:
            arguments = stage.arguments(args)
            kept = stage.kept(arguments)
            future = (cached(stage.task, self.cache_dir) if kept else stage.task).submit(
                *map(self.wrap, args), code=stage.code(arguments), embedding_store=self.embedding_store)
            submitted.append((future, kept))
        results = []
        for future, kept in submitted:
            future.wait()
            hit = kept and was_cached(future.state)
            if hit:
                self.hits += 1
            elif kept:
                self.misses += 1
                self.computed[stage.counted_as] = self.computed.get(stage.counted_as, 0) + 1
            results.append(self.work.value_of(future.state.result(), computed=not hit))
        self.seconds[stage.counted_as] = self.seconds.get(stage.counted_as, 0.0) + time.perf_counter() - started
        return results

    def call(self, stage: Stage, *args):
        return self.call_many(stage, args)[0]

    def counts(self) -> dict[str, float]:
        return {**self.work.metrics(), "cache_hits": self.hits, "cache_misses": self.misses,
                **{f"seconds_{stage}": s for stage, s in self.seconds.items()},
                **{f"computed_{stage}": float(n) for stage, n in self.computed.items()}}
