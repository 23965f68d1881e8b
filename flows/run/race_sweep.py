"""OPI's sweeper racing its jobs (``sweep.strategy=race``; ``flows.run.race`` runs the rounds): the race, its
outcome written to the sweep's folder, then each configuration's tracked run on the rounds it ran."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from flows.base.errors import run_or_explain
from flows.orchestration.files import write_atomically
from flows.base.progress import start_sweep
from flows.run.config import typed
from flows.run.data import load_data
from flows.run.embed_ahead import EmbedAhead
from flows.run.preflight import prepared, without_hydra
from flows.run.identity import describe, effective_settings
from flows.run.race import RaceRun, Rows, labels_of, outputs_of
from flows.run.race_rounds import side_by_side
from flows.tracking.race_report import RACE_FILE, verdict
from flows.tracking.runs import params_of
from flows.tracking.sweeps import naming_settings
from opi.naming import Described, short_names
from opi.schemas import OPIConfig
from hydra_plugins.opi_sweeper import composed_before, extended, keep_composed

log = logging.getLogger("opi")


def race(sweeper: Any, jobs: list[list[str]]) -> None:
    """Race ``jobs``: each round's in this process side by side, or with ``sweeper``'s launcher when it is not Hydra's
    basic one; then launch their tracked runs (``sweeper.launch``)."""
    bases = {tuple(job): composition(sweeper, job) for job in jobs}
    configurations = [typed_job(bases[tuple(job)], job) for job in jobs]

    def composed(job: list[str]) -> Any:  # a race's job: its configuration's composition plus the round's overrides
        size = base_size(job, bases)
        return extended(bases[tuple(job[:size])], job[size:])

    def launch(batch: list[list[str]]) -> list[Any]:
        for job in batch:
            keep_composed(sweeper.config, job, composed(job))
        return sweeper.launch(batch)

    config = run_or_explain(prepared, configurations[0])
    examples = load_data(config).examples
    sweep_dir = Path(sweeper.config.hydra.sweep.dir)
    bounds = [i for i, c in enumerate(configurations) if any(m.bound for m in c.members().values())]
    ahead = EmbedAhead()  # in this process only: another launcher's jobs have embedders of their own
    if in_this_process(sweeper):
        evaluate_round = side_by_side(lambda job: typed_job(composed(job), job), config.race.side_by_side, ahead)
    else:
        def evaluate_round(batch: list[list[str]]) -> list[Rows]:
            return [outputs_of(returned) for returned in launch(batch)]
    run = RaceRun(jobs, config, examples, evaluate_round, bounds, ahead)
    log.info("racing %d configurations on %d examples in %d round%s of whole clusters, by %s (alpha %g)%s",
             len(run.jobs), len(examples), len(run.plan), "" if len(run.plan) == 1 else "s", run.metric,
             config.race.alpha,
             f"; the {len(bounds)} bound(s) run once, at the end, on the rounds the race ran" if bounds else "")
    if run.race.clusters < config.race.min_clusters:
        log.warning("this data has %d clusters (articles, or dataset.group), fewer than race.min_clusters=%d, the "
                    "fewest a configuration is compared on before it can be dropped: no configuration will be "
                    "dropped, and the race will cost what the grid costs", run.race.clusters, config.race.min_clusters)
    start_sweep(None)  # the rounds launch an unknown number of jobs: the progress lines count without a total
    try:
        outcome = run.run()
    finally:  # the race has ended, stopped or failed: nothing more is embedded ahead
        ahead.close()
    outcome["names"] = race_names(jobs, configurations)
    write_atomically(sweep_dir / RACE_FILE, lambda path: path.write_text(json.dumps(outcome, indent=1)))
    log.info("%s", verdict(outcome))
    launch(run.record_jobs())


def race_names(jobs: list[list[str]], configurations: list[OPIConfig]) -> dict[str, str]:
    """Each configuration's name in the race (its overrides that set it apart) -> the short name its tracked run
    gets in the sweep's tables ("kNN k=2", ``opi.naming.short_names``), for the verdict and the race table."""
    described = []
    for config in configurations:  # what flows.tracking.sweeps.described reads back from the run
        identity = describe(config)
        described.append(Described(identity.retrieval, identity.reader, identity.classifier,
                                   naming_settings(params_of(effective_settings(config)))))
    return dict(zip(labels_of(jobs), short_names(described)[0]))


def base_size(job: list[str], bases: dict) -> int:
    """How many of a race's job's overrides are the sweep's job it extends (one of ``bases``): the race appends its
    own from ``dataset.rounds=`` on. Jobs of a union of grids differ in length, and one may begin another."""
    for size in range(len(job), 0, -1):
        if tuple(job[:size]) in bases and (size == len(job) or job[size].startswith("dataset.rounds=")):
            return size
    raise KeyError(f"no job of the sweep begins the race's job {job}")


def in_this_process(sweeper: Any) -> bool:
    """The sweep's launcher is Hydra's basic one (``hydra/launcher=basic``, the default), which runs its jobs one
    after another in this process: a round's jobs then run side by side here instead (``flows.run.race_rounds``).
    Another launcher (joblib, submitit) runs them where it runs jobs."""
    from omegaconf import OmegaConf

    return (OmegaConf.select(sweeper.config, "hydra.runtime.choices") or {}).get("hydra/launcher") == "basic"


def composition(sweeper: Any, job: list[str]) -> Any:
    """A job's composition: the one the preflight kept, else composed now (and kept)."""
    composed = composed_before(sweeper.config, job)
    if composed is None:
        composed = sweeper.loader.loader.load_sweep_config(sweeper.config, list(job))
        keep_composed(sweeper.config, job, composed)
    return composed


def typed_job(composed: Any, job: list[str]) -> OPIConfig:
    """A job's typed configuration, from its composition."""
    settings, choices = without_hydra(composed.copy())
    return typed(settings, list(job), choices)
