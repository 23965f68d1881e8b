"""The work of a configuration's stage tasks, measured inside each task wherever it runs (a thread of this process,
a Dask worker) and sent back with its result, so a configuration's counts are the sum of what its tasks did, not a
difference of this process's counters (which, on Dask, did none of it).

- ``measuring``: a stage's body run with the run's embedding store (``embedding_store``, a keyword its cache key
  leaves out: a worker process reads and writes the same store as the driver) inside ``opi.embeddings.counting``,
  returning ``Measured``: its value, its embedding work, and its process's totals.
- ``RunWork``: the driver's tally: the work of the calls computed in this run (a cache hit did none) and each
  process's totals as last reported.

Under Dask, tasks that run one after another share what each computed through the store: a text one worker
embedded is read by the next, so ``texts_embedded`` is the default runner's. Tasks that run at the same time on two
workers (a combination's member rankings) may each compute the same texts, and both are counted: that work was
done twice. ``texts_from_embedding_store`` also counts, on Dask, what a worker read that another worker had computed
(in this run, or the run before on workers since gone): the default runner's one process holds it in memory, so the
count is higher on Dask. So are ``embedder_unique_texts`` and ``embedder_texts_requested_total``, summed over the
processes (a text two workers hold is two; a classifier fitted again on a second worker asks for its texts again).
"""
from __future__ import annotations

import functools
import inspect
import os
import socket
from dataclasses import dataclass
from typing import Any, Callable

from opi.embeddings import counting, embedding_counts, use_store

WORK = ("texts_embedded", "texts_from_embedding_store")  # logged by every configuration, 0 when nothing embedded
KEYWORDS = [inspect.Parameter("code", inspect.Parameter.KEYWORD_ONLY, default=""),  # for the cache key only
            inspect.Parameter("embedding_store", inspect.Parameter.KEYWORD_ONLY, default=None)]


@dataclass(frozen=True)
class Measured:
    """A task's ``value`` and what computing it took: ``work`` (texts embedded, read from the embedding store, an
    embedding endpoint's usage) and the embedder ``totals`` of the ``process`` it ran in, so far."""

    value: Any
    work: dict[str, float]
    process: str
    totals: dict[str, float]


def this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def embedder_totals() -> dict[str, float]:
    """This process's embedders since it started: texts computed, distinct texts held, texts asked for."""
    counts = embedding_counts()
    return {"embedder_texts_embedded_total": counts["computed"], "embedder_unique_texts": counts["unique"],
            "embedder_texts_requested_total": counts["computed"] + counts["stored"] + counts["memory"]}


def measuring(fn: Callable) -> Callable:
    """``fn`` run with the embedding store given as ``embedding_store`` and its work counted: a ``Measured``.
    ``code`` (the source the result depends on) is a parameter for the cache key alone."""
    @functools.wraps(fn)
    def body(*args, code: str = "", embedding_store: str | None = None, **kwargs) -> Measured:
        with use_store(embedding_store), counting() as work:
            value = fn(*args, **kwargs)
        return Measured(value, work.counts, this_process(), embedder_totals())

    signature = inspect.signature(fn)  # Prefect binds a call's arguments to it
    body.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *KEYWORDS])
    return body


class RunWork:
    """What a configuration's tasks reported: ``counts``, the work of the calls computed in this run, summed; and
    ``processes``, each process's embedder totals as last reported."""

    def __init__(self):
        self.counts: dict[str, float] = {}
        self.processes: dict[str, dict[str, float]] = {}

    def value_of(self, result: Any, computed: bool) -> Any:
        """The task's value, its work taken when it was computed in this run (a cached result's is another run's).
        A result cached before tasks were measured is the value itself."""
        if not isinstance(result, Measured):
            return result
        if computed:
            self.add(result.work)
            self.seen(result.process, result.totals)
        return result.value

    def add(self, counts: dict[str, float]) -> None:
        for name, value in counts.items():
            self.counts[name] = self.counts.get(name, 0.0) + value

    def seen(self, process: str, totals: dict[str, float]) -> None:
        """A process's totals only grow: the largest reported is the latest."""
        known = self.processes.setdefault(process, {})
        for name, value in totals.items():
            known[name] = max(known.get(name, 0.0), value)

    def metrics(self) -> dict[str, float]:
        """The work of this run, and the embedder totals summed over the processes its tasks were computed in and
        this one (the default runner: this process alone, over every configuration it ran so far; Dask: the
        driver and the run's workers)."""
        here = embedder_totals()
        self.seen(this_process(), here)
        totals = {name: sum(process.get(name, 0.0) for process in self.processes.values()) for name in here}
        return {**dict.fromkeys(WORK, 0.0), **self.counts, **totals}
