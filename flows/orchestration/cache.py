"""The stage cache: task results kept under ``paths.cache_dir``, keyed by content.

- ``hashed`` and ``key_of`` (``flows.orchestration.hashing``): inputs as plain data for a key.
- ``cached``: a task with that key (``ContentInputs``), plus the task's source and the ``code`` argument every task
  takes (``flows.orchestration.code``), persisted under the cache folder with SERIALIZABLE isolation and file locks:
  when two processes need the same result, one computes it and the other waits and reads it.
- ``StageCalls`` calls stages as they are declared, counts hits and misses, and takes the work each computed call
  measured (``flows.orchestration.work``).

Whole results under one key (a configuration's, a report's figures) are kept beside it, without Prefect
(``flows.orchestration.kept``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from prefect.cache_policies import TASK_SOURCE, CachePolicy, Inputs
from prefect.utilities.annotations import quote

from flows.orchestration.cache_files import CacheFileSystem
from flows.orchestration.hashing import key_of
from flows.orchestration.locks import FileLockManager
from flows.orchestration.prefect_adapter import was_cached, with_result_storage
from flows.orchestration.stage import Stage
from flows.orchestration.work import RunWork


@dataclass
class ContentInputs(CachePolicy):
    """Prefect's INPUTS policy over ``key_of`` the inputs, but where the embedding store is (vectors are the same
    whichever store keeps them). Not a subclass of Inputs: a compound policy replaces every Inputs member by a
    plain one."""

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs):
        return Inputs().compute_key(task_ctx, {name: key_of(value) for name, value in (inputs or {}).items()
                                               if name != "embedding_store"}, flow_parameters, **kwargs)


def cache_layout(cache_dir: str) -> tuple[CacheFileSystem, CacheFileSystem, FileLockManager]:
    """Where the cache keeps task results, their keys (metadata) and its locks."""
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
