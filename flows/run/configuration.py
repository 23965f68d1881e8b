"""One configuration: its whole result read from the cache under ``configuration_key`` (without Prefect, when
nothing needs orchestrating), or computed stage by stage in one Prefect flow run (``flows.run.pipeline``), with
this run's embedding work counted: what its stage tasks measured, wherever they ran (``flows.orchestration.work``),
and what this process did outside them."""
from __future__ import annotations

import dataclasses
import logging
import sys
import time
from pathlib import Path
from typing import Any, Callable

from flows.orchestration.code import code_version, remember_imports
from flows.orchestration.hashing import content_hash
from flows.orchestration.kept import keep, read_kept
from flows.orchestration.server import run_flow, start_temporary_server
from flows.orchestration.tasks import STAGES, RegisteredModel
from flows.orchestration.work import RunWork
from flows.run.data import Data, load_data, training_for, training_key
from flows.run.identity import describe, effective_settings, live_stores
from flows.run.race import assembled
from flows.tracking.registry import resolve_registered
from flows.tracking.runs import flatten
from opi.embeddings import counting, embedder_for, use_store
from opi.metrics.configuration import as_reused
from opi.schemas import OPIConfig

log = logging.getLogger("opi")
FLOWS = Path(__file__).resolve().parent.parent  # the flow code that assembles a configuration's result


def result_code(config: OPIConfig) -> str:
    """The source a configuration's whole result depends on: every stage's modules and components, the metrics,
    and the flow code that assembles them."""
    used = ["opi.embeddings", *(module for stage in STAGES if stage.name != "sweep-report" for module in stage.uses)]
    files = [*(FLOWS / "run").glob("*.py"), *(FLOWS / "orchestration").glob("*.py")]
    remember_imports(config.paths.cache_dir)
    return code_version(*used, "opi.metrics.configuration", "opi.metrics.retrieval", "opi.predictions",
                        *config.members().values(),
                        config.combination, config.rerank, config.llm.reader, config.classifier, files=files)


def configuration_key(config: OPIConfig, data: Data, registered: RegisteredModel | None) -> str:
    """Everything a configuration's result depends on: its effective settings (not where runs are logged, how
    tasks are scheduled or how the sweep runs), the data's content (and the classifier's training data), the registered classifier
    version and the source it runs."""
    settings = {name: value for name, value in effective_settings(config).items()
                if name not in ("tracking", "orchestration", "paths", "sweep", "race")}
    settings["report"].pop("enabled")
    training = training_for(config, data) if config.relations.gold != "none" else None
    return "configuration-" + content_hash(
        settings, config.paths.llm_cache, data.examples.content_hash, data.contexts.content_hash,
        training_key(training), registered.uri if registered else None, result_code(config))


def run_configuration(config: OPIConfig, not_kept: tuple[Data, RegisteredModel | None, str] | None = None
                      ) -> dict[str, Any]:
    """One configuration's metrics and tables: kept whole under ``configuration_key`` (a re-run reads one result),
    else computed stage by stage (each stage cached on its own inputs, shared with other configurations).
    ``not_kept``: its ``lookup``, when the caller has already found no kept result under that key."""
    cache_dir, started = config.paths.cache_dir, time.perf_counter()
    with counting() as here:  # what this process embeds outside the stage tasks (each counts its own)
        data, registered, key = not_kept or lookup(config)
        kept = None if not_kept else read_kept(cache_dir, key)
        if kept is not None:
            return from_kept(config, kept, started, key)
        from_rounds = None if not_kept else from_kept_rounds(config, data, key, started)
        if from_rounds is not None:
            return from_rounds
        from flows.run.pipeline import run_stages  # Prefect's tasks: only where a stage runs

        result, counts = run_stages(config, data, registered)
        # replies that were no answer are asked again by the next run; a vector store is asked again every run
        if not unanswered(result.metrics) and not live_stores(config):
            keep(cache_dir, key, result)
    log.info("%s: %d of %d stage results reused from the cache", describe(config).name, counts["cache_hits"],
             result.stages)
    return as_returned(result, {**counts, **{name: counts.get(name, 0.0) + value
                                             for name, value in here.counts.items()}}, key)


def from_kept_rounds(config: OPIConfig, data: Data, key: str, started: float) -> dict[str, Any] | None:
    """A race's tracked run (``race.record``) put together from its rounds' kept results, nothing computed again;
    None when it is not one, or a round's result is missing."""
    rounds = kept_rounds(config, data) if config.race.record else None
    if rounds is None:
        return None
    result = assembled(config, rounds, data.relation_set.labels, [e.id for e in data.examples])
    keep(config.paths.cache_dir, key, result)
    log.info("%s: assembled from the %d rounds' results the race computed", describe(config).name, len(rounds))
    return as_returned(result, {**RunWork().metrics(), "cache_hits": result.stages, "cache_misses": 0,
                                "seconds_lookup": time.perf_counter() - started}, key)


def kept_rounds(config: OPIConfig, data: Data) -> list[Any] | None:
    """Each round's kept result of a race's tracked run (rounds ``rounds_from`` to ``rounds_to``), or None when one
    is missing (then the run is computed whole)."""
    dataset = config.dataset
    if dataset.rounds is None or live_stores(config):
        return None
    found = []
    for number in range(dataset.rounds_from, (dataset.rounds_to or dataset.rounds) + 1):
        one = dataclasses.replace(config, dataset=dataclasses.replace(dataset, rounds_from=number, rounds_to=number),
                                  race=dataclasses.replace(config.race, record=False))
        kept = read_kept(config.paths.cache_dir, lookup(one)[2])
        if kept is None:
            return None
        found.append(kept)
    return found


def lookup(config: OPIConfig) -> tuple[Data, RegisteredModel | None, str]:
    """The configuration's data, registered classifier and the key of its whole result."""
    data = load_data(config)
    registered = resolve_registered(config)
    return data, registered, configuration_key(config, data, registered)


def from_kept(config: OPIConfig, kept: Any, started: float, key: str) -> dict[str, Any]:
    """A configuration's result as kept whole: one read, nothing computed."""
    log.info("%s: %d of %d stage results reused from the cache (the configuration's whole result, one read)",
             describe(config).name, kept.stages, kept.stages)
    # its LLM usage as this run spent it: nothing (its replies were paid for by the run that computed it)
    reused = dataclasses.replace(kept, metrics=as_reused(kept.metrics))
    return as_returned(reused, {**RunWork().metrics(), "cache_hits": kept.stages, "cache_misses": 0,
                                "seconds_lookup": time.perf_counter() - started}, key)


def as_returned(result: Any, counts: dict[str, float], key: str) -> dict[str, Any]:
    """``key``: the result's ``configuration_key`` (what its run's traces are matched on)."""
    return {"metrics": {**result.metrics, **counts}, "predictions": result.predictions,
            "per_relation": result.per_relation, "traces": result.traces, "key": key}


def unanswered(metrics: dict[str, float]) -> float:
    """How many LLM replies of the run were no answer (empty, or refusals)."""
    return sum(v for k, v in metrics.items() if k.endswith(("_empty_replies", "_refusals")))


def evaluate(config: OPIConfig) -> dict[str, Any]:
    """The configuration as one Prefect flow run; one whose whole result is kept, or a race's tracked run whose
    rounds' results are, is read without Prefect (nothing to orchestrate: no flow run, no server waited for), unless
    it runs inside a flow already (the nightly's, whose configurations are its subflows). The configuration travels
    to the flow by closure, not as a flow parameter: Prefect keeps no copy of it (or of an ``llm.base_url`` with
    credentials in it) in its database; its parameters, shown in Prefect's UI, are its name and its settings as its
    MLflow params (secret-named settings left out, credentials redacted)."""
    not_kept = None
    if not inside_flow_run():
        started, found = time.perf_counter(), lookup(config)
        kept = read_kept(config.paths.cache_dir, found[2])
        if kept is not None:
            return from_kept(config, kept, started, found[2])
        from_rounds = from_kept_rounds(config, found[0], found[2], started)  # nothing to orchestrate either
        if from_rounds is not None:
            return from_rounds
        not_kept = found  # the flow computes it without looking the key up again
    start_temporary_server()  # boots while Prefect is imported and the model loads (none if the user named one)
    from prefect import flow

    from flows.orchestration.runners import task_runner

    @flow(name="opi-evaluate", flow_run_name=describe(config).name, task_runner=task_runner(config.orchestration))
    def evaluate_configuration(configuration: str, settings: dict[str, Any]) -> dict[str, Any]:
        with use_store(config.paths.embedding_store):  # this process's embedders (each stage task names it too)
            return run_configuration(config, not_kept)

    return run_flow(evaluate_configuration, describe(config).name, flatten(effective_settings(config)),
                    while_booting=model_loading(config))


def model_loading(config: OPIConfig) -> Callable[[], None] | None:
    """What a flow does while the server it needs still boots: load the model (``load_model``) where its stages run
    in this process (threads; Dask's workers load their own)."""
    return (lambda: load_model(config)) if config.orchestration.runner == "threads" else None


def load_model(config: OPIConfig) -> None:
    """The yardstick's model (``metrics.similarity``: every run scores its answers with it, and by default it is the
    model the retrievers and reader use too), loaded while Prefect's temporary server is still starting rather than
    by a stage after it (importing torch and sentence-transformers and loading the model: ~4 s): the same embedder
    its stages use (``embedder_for`` under the run's store). A model only some components would use is left to them:
    it may be none of this configuration's."""
    with use_store(config.paths.embedding_store):
        embedder_for(config.metrics.similarity).load()


def inside_flow_run() -> bool:
    if "prefect.context" not in sys.modules:  # Prefect not even imported: no flow run
        return False
    from prefect.context import FlowRunContext

    return FlowRunContext.get() is not None
