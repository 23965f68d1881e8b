"""A racing sweep (``sweep.strategy=race``): the sweep's configurations evaluated round by round on whole clusters
of the data (``opi.racing``), the ones significantly worse than the leader dropped after each round (``opi.race``,
its asymptotic test; with ``race.indifference``, also those the leader is shown within it of), until one is
left, the survivors tie within ``race.margin``, none can be dropped any more, ``race.budget`` is spent or the data
is exhausted. Then each configuration gets one tracked run on the rounds it ran, put together from those rounds'
kept results (``assembled``: nothing is computed or paid twice): those are the sweep's MLflow runs, and
they record the race's outcome (``race.json`` in the sweep's folder, ``flows.tracking.race_report``, read by
``race.record`` jobs and by the parent run).

A round's configurations run with tracking and the report off: with Hydra's basic launcher side by side in this
process (``flows.run.race_rounds``: their waits on an LLM endpoint overlap, and one's Python runs while others
wait), with any other launcher as its jobs, their predictions read from their output folders (``outputs_of``)."""
from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import pandas as pd

from flows.tracking.race_report import named, read_outcome
from opi.race import Race
from opi.racing import RELATION_METRICS, beta_of, cluster_scores, rounds_of
from opi.schemas import OPIConfig

if TYPE_CHECKING:  # it imports the preflight, which imports this module
    from flows.run.embed_ahead import EmbedAhead

log = logging.getLogger("opi")
ROUND_KEYS = ("dataset.rounds", "dataset.rounds_from", "dataset.rounds_to", "race.record")


def job_key(overrides: Sequence[str]) -> str:
    """A configuration of the sweep by its job's overrides, without those the race adds."""
    return " ".join(o for o in overrides if o.split("=", 1)[0].lstrip("+~") not in (*ROUND_KEYS, "tracking.enabled",
                                                                                    "report.enabled"))


def labels_of(jobs: Sequence[Sequence[str]]) -> list[str]:
    """Each job's name in the race: what sets it apart from the other jobs (its overrides no other job shares)."""
    shared = set.intersection(*(set(job) for job in jobs)) if jobs else set()
    return [" ".join(o for o in job if o not in shared) or " ".join(job) for job in jobs]


def race_metric(config: OPIConfig) -> str:
    """The metric a race runs on: ``race.metric``, else the report's headline."""
    if config.race.metric:
        return config.race.metric
    from opi.metrics.opi import beta_key

    return beta_key(config.metrics.beta) if config.relations.gold != "none" else "bertsim"


def metric_problem(config: OPIConfig) -> str | None:
    """Why the sweep cannot race on its metric (None: it can): one it does not compute."""
    metric = race_metric(config)
    if metric.startswith(RELATION_METRICS) and config.relations.gold == "none":
        return f"race.metric={metric} needs gold relations, and this sweep has none (relations.gold=none)"
    if metric in ("bertsim", "lrcr", *PER_EXAMPLE):
        if metric == "correctness" and not config.metrics.correctness:
            return ("race.metric=correctness needs the answer-correctness judge, which this sweep does not run: set "
                    "metrics.correctness=true (LLM calls through the run's llm endpoint)")
        return None
    if metric.startswith("opi_"):
        try:
            beta = beta_of(metric)
        except ValueError:
            beta = float("nan")
        if not (math.isfinite(beta) and beta > 0):
            return f"race.metric={metric}: OPI's β is a number above 0, written opi_1, opi_0_5 or opi_2"
        return None
    if metric.startswith(("ndcg_at_", "recall_at_")):
        k = metric.rsplit("_", 1)[1]
        if not (k.isdigit() and int(k) in config.metrics.retrieval_k):
            cut = sorted(config.metrics.retrieval_k)
            return (f"race.metric={metric}: the sweep computes {metric.rsplit('_', 1)[0]}_<k> for k in "
                    f"metrics.retrieval_k={cut}: race on one of those, or add the cut-off there")
        return None
    return (f"race.metric={metric} is not a per-example metric this sweep computes: choose bertsim, lrcr, "
            f"opi_<β>, ndcg_at_<k>, recall_at_<k>, mrr, evidence_recall, answer_found or correctness")


PER_EXAMPLE = ("mrr", "evidence_recall", "answer_found", "correctness")


@dataclass
class Spent:
    examples: int = 0
    llm_calls: int = 0
    usd: float = 0.0
    texts_embedded: int = 0  # the model's work: texts a round computed (those shared are computed once)
    texts_embedded_ahead: int = 0  # of those, embedded for the next round while a round ran (race.embed_ahead)

    def add(self, rows: int, metrics: dict[str, float]) -> None:
        self.examples += rows
        self.llm_calls += int(sum(v for k, v in metrics.items() if k.endswith("_http_requests")))
        self.usd += float(metrics.get("llm_cost_usd", 0.0))
        self.texts_embedded += int(metrics.get("texts_embedded", 0.0))

    def of(self, unit: str) -> float:
        return {"examples": self.examples, "llm_calls": self.llm_calls, "usd": self.usd}[unit]

    def line(self) -> str:
        return f"{self.examples} example evaluations, {self.llm_calls} LLM calls, ${self.usd:.2f} spent"


@dataclass
class Outcome:
    """One configuration's part in the race, as its MLflow run and the parent's race table show it."""
    label: str
    outcome: str  # survivor | eliminated
    rounds_run: int
    clusters: int
    examples: int
    estimate: float  # its mean race metric over the clusters it ran
    leader: str | None = None  # who it was compared with: the one that dropped it, or the leader at the end
    difference: float | None = None  # its mean minus the leader's, with the bounds then
    low: float | None = None
    high: float | None = None
    spent: dict[str, float] = field(default_factory=dict)
    within: bool = False  # dropped as within race.indifference of ``leader``, not as worse


Rows = tuple[pd.DataFrame, dict[str, float]]  # a round job's prediction rows and metrics


class RaceRun:
    """One race over ``jobs``; ``evaluate(batch)`` runs a round's jobs (lists of overrides) and returns each one's
    prediction rows and metrics, in order."""

    def __init__(self, jobs: list[list[str]], config: OPIConfig, examples: Sequence,
                 evaluate: Callable[[list[list[str]]], list[Rows]], bounds: Sequence[int] = (),
                 ahead: EmbedAhead | None = None):
        """``bounds``: the indexes of jobs that are bounds (random, oracle): reference points, not raced; each is
        run once, tracked, on the rounds the race ran. ``ahead``: what ``evaluate`` embeds of each next round while
        a round runs (``flows.run.embed_ahead``), stopped when the race ends and counted in what it spent."""
        self.config, self.evaluate, self.ahead = config, evaluate, ahead
        names = labels_of(jobs)
        self.bounds = [(job, name) for i, (job, name) in enumerate(zip(jobs, names)) if i in set(bounds)]
        self.jobs = [job for i, job in enumerate(jobs) if i not in set(bounds)]
        self.labels = [name for i, name in enumerate(names) if i not in set(bounds)]
        self.metric = race_metric(config)
        settings = config.race
        self.plan = rounds_of(examples, settings.rounds, config.seed)
        self.plan = [clusters for clusters in self.plan if clusters]  # fewer clusters than rounds
        self.race = Race(self.labels, sum(map(len, self.plan)), settings.alpha, "asymptotic", settings.min_clusters,
                         settings.indifference)
        self.total = {label: 0.0 for label in self.labels}
        self.seen = {label: 0 for label in self.labels}
        self.rounds_run = {label: 0 for label in self.labels}
        self.spent, self.each = Spent(), {label: Spent() for label in self.labels}
        self.grid_examples = len(examples) * len(self.jobs)  # the raced configurations' grid
        self.stopped = "the data was exhausted"

    def run(self) -> dict[str, Any]:
        settings = self.config.race
        for number, clusters in enumerate(self.plan, start=1):
            alive = self.race.alive
            batch = [[*self.jobs[self.labels.index(label)], *self.round_overrides(number)]
                     for label in alive]
            scores = {}
            for label, (rows, metrics) in zip(alive, self.evaluate(batch)):
                scores[label] = cluster_scores(rows, self.metric)
                self.each[label].add(len(rows), metrics)
                self.spent.add(len(rows), metrics)
                self.rounds_run[label] = number
                self.total[label] += sum(scores[label].get(cluster, 0.0) for cluster in clusters)
                self.seen[label] += len(clusters)
            for cluster in clusters:
                if len(self.race.alive) > 1:
                    self.race.observe({label: scores[label].get(cluster, 0.0) for label in self.race.alive})
            log.info("round %d/%d: %d examples so far, %d of %d configurations left, %s", number, len(self.plan),
                     self.each[alive[0]].examples, len(self.race.alive), len(self.labels), self.spent.line())
            if len(self.race.alive) == 1:
                self.stopped = "one configuration was left"
                break
            if self.race.settled:
                covered = "" if self.race.all_kept else (", is shown within it of one that does, or is shown "
                                                         "better than all the others")
                self.stopped = (f"each of the {len(self.race.alive)} left stands for those within "
                                f"race.indifference={settings.indifference:g} of it{covered}")
                break
            if self.race.tied(settings.margin):
                self.stopped = f"the survivors were within race.margin={settings.margin:g} of each other"
                break
            spent = self.spent.of(settings.budget_unit)
            if settings.budget is not None and spent >= settings.budget:
                shown = f"${spent:.2f}" if settings.budget_unit == "usd" else f"{spent:g}"
                self.stopped = (f"race.budget={settings.budget:g} {settings.budget_unit} was spent ({shown} after "
                                "the round)")
                break
        if self.ahead is not None:  # a round that will not run: its embedding ahead stops, what it did is counted
            self.ahead.stop()
            self.spent.texts_embedded_ahead = self.ahead.texts_embedded
            self.spent.texts_embedded += self.ahead.texts_embedded
        return self.outcome()

    def round_overrides(self, number: int) -> list[str]:
        """A round's job: its part of the data, untracked (the race logs each configuration once, at the end)."""
        return [f"dataset.rounds={self.config.race.rounds}", f"dataset.rounds_from={number}",
                f"dataset.rounds_to={number}", "tracking.enabled=false", "report.enabled=false"]

    def leader(self) -> str:
        alive = self.race.alive
        return max(alive, key=lambda label: self.total[label] / max(self.seen[label], 1))

    def outcome(self) -> dict[str, Any]:
        leader, dropped = self.leader(), {e.configuration: e for e in self.race.eliminated}
        outcomes = {}
        for job, label in zip(self.jobs, self.labels):
            by = dropped[label].by if label in dropped else leader
            difference = low = high = None
            if by != label:
                difference, low, high = self.race.difference(label, by)
            outcomes[job_key(job)] = Outcome(
                label, "eliminated" if label in dropped else "survivor", self.rounds_run[label], self.seen[label],
                self.each[label].examples, self.total[label] / max(self.seen[label], 1), by if by != label else None,
                *(finite(v) for v in (difference, low, high)), asdict(self.each[label]),
                label in dropped and dropped[label].within)
        last = max(self.rounds_run.values())
        clusters, examples = max(self.seen.values()), max(spent.examples for spent in self.each.values())
        for job, label in self.bounds:  # recorded on the rounds the survivors ran (record_jobs), not raced
            outcomes[job_key(job)] = Outcome(label, "bound", last, clusters, examples, float("nan"))
        return {"metric": self.metric, "alpha": self.config.race.alpha, "margin": self.config.race.margin,
                "indifference": self.config.race.indifference,
                "rounds": len(self.plan), "clusters": self.race.clusters, "configurations": len(self.labels),
                "stopped": self.stopped, "spent": asdict(self.spent), "grid_examples": self.grid_examples,
                "survivors": self.race.alive, "leader": leader,
                "eliminated": [asdict(e) for e in self.race.eliminated],
                "jobs": {key: {**asdict(value), "estimate": finite(value.estimate)}
                         for key, value in outcomes.items()}}

    def record_jobs(self) -> list[list[str]]:
        """Each configuration once more on the rounds it ran, tracked, recording its outcome."""
        last = max(self.rounds_run.values())
        ran = [*((job, self.rounds_run[label]) for job, label in zip(self.jobs, self.labels)),
               *((job, last) for job, _ in self.bounds)]
        return [[*job, f"dataset.rounds={self.config.race.rounds}", "dataset.rounds_from=1",
                 f"dataset.rounds_to={rounds}", "race.record=true"] for job, rounds in ran]


def finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def outputs_of(returned: Any) -> Rows:
    """A round job's prediction rows and metrics, from its output folder (a job of the sweep's launcher)."""
    _ = returned.return_value  # a failed job raises here, as with Hydra's basic sweeper
    folder = Path(returned.hydra_cfg.hydra.runtime.output_dir)
    metrics = json.loads((folder / "metrics.json").read_text())
    return pd.read_parquet(folder / "predictions.parquet"), {k: v for k, v in metrics.items() if v is not None}


def race_tags(config: OPIConfig) -> dict[str, str]:
    """A race's tracked run (``race.record``): its outcome in the race, as tags (the full grid's runs have none)."""
    from hydra.core.hydra_config import HydraConfig

    if not config.race.record or not HydraConfig.initialized():
        return {}
    hydra = HydraConfig.get()
    return outcome_tags(read_outcome(hydra.sweep.dir), job_key(list(hydra.overrides.task)))


def outcome_tags(outcome: dict[str, Any] | None, key: str) -> dict[str, str]:
    """The ``opi.race.*`` tags of the configuration ``key`` (``job_key``) in a race's ``outcome``."""
    mine = (outcome or {}).get("jobs", {}).get(key)
    if mine is None:
        return {"opi.race.outcome": "unknown (no race.json entry)"}
    tags = {"opi.race.outcome": mine["outcome"], "opi.race.metric": outcome["metric"],
            "opi.race.rounds_run": f"{mine['rounds_run']} of {outcome['rounds']}"}
    if mine["outcome"] == "bound":  # not raced: run once on the rounds the race ran
        return tags
    spent = mine["spent"]
    tags.update({"opi.race.estimate": f"{mine['estimate']:.4f} over {mine['clusters']} clusters",
                 "opi.race.spent": f"{spent['examples']} example evaluations, {spent['llm_calls']} LLM calls, "
                                   f"${spent['usd']:.2f}"})
    if mine["leader"] is not None:
        bounds = "no bound yet" if mine["low"] is None else f"[{mine['low']:+.4f}, {mine['high']:+.4f}]"
        within = f", dropped as within race.indifference={outcome['indifference']:g}" if mine.get("within") else ""
        tags["opi.race.against"] = f"{named(outcome)(mine['leader'])}: {mine['difference']:+.4f} {bounds}{within}"
    return tags


SAME_IN_EVERY_ROUND = ("classifier_cv_accuracy", "rows_dropped", "store_documents", "store_documents_not_found")


def assembled(config: OPIConfig, rounds: Sequence[Any], relations: Sequence[str], order: Sequence[str]) -> Any:
    """A configuration's result on several rounds, from each round's kept result (``flows.orchestration.results.Scores``):
    the rows put together and scored once (every metric computed from rows: BERTSim, LRCR, OPI, their intervals and
    per-relation values, the retrieval metrics), the counts and times summed, what every round shares kept. The
    same as evaluating the rounds' examples at once: each example's row depends on its own question, article and
    the caches only; ``order``: the examples' ids in the data's order, which the rows take (the intervals'
    bootstrap draws by position)."""
    from flows.orchestration.results import Scores
    from opi.metrics.configuration import configuration_metrics

    rows = pd.concat([result.predictions for result in rounds], ignore_index=True)
    rows = rows.set_index("id", drop=False).loc[list(order)].reset_index(drop=True)
    metrics, table = configuration_metrics(rows, relations, config.metrics.betas, config.metrics.beta,
                                           config.report.confidence, config.report.resamples, config.seed,
                                           config.report.unit)
    for name in dict.fromkeys(key for result in rounds for key in result.metrics):
        if name in metrics:
            continue
        values = [result.metrics[name] for result in rounds if name in result.metrics]
        metrics[name] = values[0] if name in SAME_IN_EVERY_ROUND else float(sum(values))
    traces = {example: record for result in rounds for example, record in result.traces.items()}
    return Scores(metrics, rows, table, traces, rounds[0].stages)
