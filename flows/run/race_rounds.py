"""A race's round evaluated side by side in this process (``sweep.strategy=race`` with Hydra's basic launcher).

Each surviving configuration's round job is typed from its composition plus the round's value overrides, as Hydra
would compose the job, and checked in turn before any work. Then up to ``race.side_by_side`` are evaluated at once,
each in a thread of its own. Their waits on an LLM endpoint overlap (requests in flight to one endpoint stay within
its ``concurrency``: ``opi.llm.client.in_flight``), and one configuration's Python runs while others wait on the
endpoint or on the embedding model. Each returns what its job would have written: its prediction rows and metrics;
its result is kept as a job's is, so the tracked runs are assembled from it.
"""
from __future__ import annotations

import contextvars
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import zip_longest
from typing import Callable

from flows.base.errors import run_or_explain
from flows.run.configuration import evaluate, model_loading
from flows.run.embed_ahead import EmbedAhead
from flows.run.preflight import prepared
from flows.run.race import Rows
from opi.schemas import OPIConfig


def side_by_side(configuration_of: Callable[[list[str]], OPIConfig], at_once: int, ahead: EmbedAhead | None = None
                 ) -> Callable[[list[list[str]]], list[Rows]]:
    """A race's round evaluator: ``configuration_of(job)`` types a round job (a list of overrides); ``ahead``
    embeds the next round's articles while the round runs (``flows.run.embed_ahead``). The yardstick's models are
    loaded first, in this thread (a load that fails is one line, as a round's failure is): torch imported in one of
    the round's threads while another imported scikit-learn (whose scipy looks torch up) failed the race ("partially
    initialized module 'torch'"), and a Ctrl-C during a load in a thread waited for the load to end."""

    def evaluate_round(batch: list[list[str]]) -> list[Rows]:
        configurations = [run_or_explain(prepared, configuration_of(job)) for job in batch]
        for loading in models_to_load(configurations):  # here, not in the round's threads (below)
            run_or_explain(loading)
        if ahead is not None:
            ahead.start(configurations)
        pool = ThreadPoolExecutor(max_workers=min(at_once, len(configurations)), thread_name_prefix="opi-round")
        try:  # each in a copy of this thread's context: inside the nightly's flow run, their flows are its subflows
            running = {i: pool.submit(contextvars.copy_context().run, rows_of, configurations[i])
                       for i in starting_order(configurations)}
            # the first failure, one line: not one per configuration
            return run_or_explain(results_of, [running[i] for i in range(len(configurations))])
        finally:  # a failure or Ctrl-C: nothing more starts; those running end (an LLM wait sees the stop)
            pool.shutdown(wait=True, cancel_futures=True)

    return evaluate_round


def models_to_load(configurations: list[OPIConfig]) -> list[Callable[[], None]]:
    """Each distinct yardstick model the round's configurations load in this process (``model_loading``)."""
    loads: dict[str, Callable[[], None]] = {}
    for config in configurations:
        loading = model_loading(config)
        if loading is not None:
            loads.setdefault(repr((config.metrics.similarity, config.paths.embedding_store)), loading)
    return list(loads.values())


def starting_order(configurations: list[OPIConfig]) -> list[int]:
    """The order a round's configurations start in: those that embed the round's new articles taken in turn with
    those that do not. The embedding takes both cores and one configuration at a time (the others asking for the
    same texts wait for it); in the sweep's order the first ones side by side were often all dense, and the LLM
    endpoint waited with them."""
    dense = [i for i, config in enumerate(configurations) if embeds_articles(config)]
    other = [i for i, config in enumerate(configurations) if not embeds_articles(config)]
    return [i for pair in zip_longest(dense, other) for i in pair if i is not None]


def embeds_articles(config: OPIConfig) -> bool:
    return any(member.embeds for member in config.members().values())


def results_of(running: list[Future]) -> list[Rows]:
    return [future.result() for future in running]


def rows_of(config: OPIConfig) -> Rows:
    result = evaluate(config)
    return result["predictions"], {k: v for k, v in result["metrics"].items() if v is not None}
