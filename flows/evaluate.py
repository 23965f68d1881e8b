"""``opi-eval``: the Hydra entry point. Each job (one configuration) is one Prefect flow run and one MLflow run.

    opi-eval                                   # kNN, extractive reader, local classifier, bundled data
    opi-eval experiment=paper_grid             # the paper's 13 configurations under one parent run
    opi-eval -m retriever=glob(*) chunking=paper,small
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import flows  # noqa: F401  (environment defaults before prefect/mlflow import)
import hydra
from omegaconf import DictConfig

from flows.config import CONF_DIR, describe, effective_settings, register_configs
from flows.entry import checked, hydra_command, run_or_explain
from flows.prefect_runtime import run_flow, start_prefect_server_early
from flows.progress import finished_one
from opi.schemas import OPIConfig, OrchestrationConfig

log = logging.getLogger("opi")
register_configs()


def prompt_tags(config: OPIConfig) -> dict[str, str]:
    """Which prompt texts (by content hash) produced this run's LLM answers and labels."""
    from opi.llm.prompts import load_prompt

    tags = {}
    if config.llm.endpoint and hasattr(config.llm.reader, "prompt"):
        tags["opi.prompt.answer"] = load_prompt(config.llm.reader.prompt).version
    if hasattr(config.classifier, "prompt"):
        tags["opi.prompt.relation"] = load_prompt(config.classifier.prompt).version
    return tags


def resolve_registered(config: OPIConfig) -> str | None:
    """``models:/name@alias`` -> ``models:/name/<version>``, so that a new version under the alias is not served
    from the cache of the old one."""
    uri = getattr(config.classifier, "registered", None)
    if not uri:
        return None
    from flows.tracking import _mlflow

    mlflow = _mlflow(config.tracking)
    name, _, alias = uri.removeprefix("models:/").partition("@")
    if not alias:
        return uri
    version = mlflow.MlflowClient().get_model_version_by_alias(name, alias).version
    log.info("relation classifier %s is version %s (no cross-fitting: it was trained elsewhere)", uri, version)
    return f"models:/{name}/{version}"


@dataclass(frozen=True)
class Data:
    """A configuration's data, validated; the parts every stage task receives are hashed once (tasks.hashed)."""

    relation_set: Any
    examples: list  # the evaluated examples
    pool: list  # the whole source, unfiltered
    report: Any
    contexts: list  # the pool's distinct articles, sorted
    labelled: str  # all | some | none of the examples carry a relation label

    @cached_property  # every job of a sweep asks for it, more than once: built and hashed once per dataset
    def pool_training(self) -> Training:
        # an unfiltered dataset's triples say no more than its examples: their hash is derived, not taken again
        # (~1 s at 12,000 rows)
        return training_from(self.pool, cross_fit=True,
                             content_hash=f"triples-of-{self.examples.content_hash}" if self.pool == self.examples
                             else None)


@dataclass(frozen=True)
class Training:
    """What a classifier that learns is trained on: the data's own labelled pool (then cross-fitted, so that no
    example is labelled by a model that saw it) or a separate labelled file."""

    ids: list[str]
    triples: list
    labels: list[str]
    cross_fit: bool


def load_data(config: OPIConfig) -> Data:
    key = {"dataset": dataclasses.asdict(config.dataset), "relations": config.relations.set, "seed": config.seed}
    return _load_data(json.dumps(key, sort_keys=True))


@lru_cache(maxsize=4)  # jobs of one multirun share the dataset: read, validate and hash it once
def _load_data(key: str) -> Data:
    from flows.tasks import hashed
    from opi.data import labelled, load_examples, select
    from opi.relations import load_relation_set
    from opi.schemas import DatasetConfig

    settings = json.loads(key)
    dataset, relation_set = DatasetConfig(**settings["dataset"]), load_relation_set(settings["relations"])
    pool, report = load_examples(dataset, relation_set.labels, settings["seed"], filtered=False)  # read once
    examples = select(pool, dataset.relations, dataset.sample, dataset.limit, settings["seed"])
    log.info("%s; evaluating %d examples", report.describe(), len(examples))
    return Data(relation_set, hashed(examples), pool, report, hashed(sorted({e.context for e in pool})),
                labelled(pool))


@lru_cache(maxsize=4)  # read, validated, built and hashed once per label file
def _file_training(path: str, relation_set: str) -> Training:
    return training_from(_labelled_file(path, relation_set), cross_fit=False)


def _labelled_file(path: str, relation_set: str) -> list:
    from opi.data import DataError, labelled, load_examples
    from opi.relations import load_relation_set
    from opi.schemas import DatasetConfig

    examples, _ = load_examples(DatasetConfig(kind="table", path=path), load_relation_set(relation_set).labels)
    if labelled(examples) != "all":
        raise DataError(f"{path} (classifier.train_path): every row needs a relation label")
    return examples


def training_for(config: OPIConfig, data: Data) -> Training | None:
    """The classifier's training data, or None when it does not learn (or cannot: no labels anywhere)."""
    from opi.data import DataError

    classifier = config.classifier
    if not getattr(classifier, "trains", False) or getattr(classifier, "registered", None):
        return None
    if getattr(classifier, "train_path", None):
        training, source = _file_training(classifier.train_path, config.relations.set), classifier.train_path
    elif data.labelled == "all":
        training, source = data.pool_training, data.report.source
    else:
        return None
    relations = sorted(set(training.labels))
    if len(relations) < 2:
        raise DataError(f"the classifier {classifier.name} learns to tell relations apart, and {source} has only "
                        f"one ({relations[0]!r}): label examples of at least two relations, or choose "
                        "classifier=llm, or relations.gold=none")
    return training


def training_from(examples: list, cross_fit: bool, content_hash: str | None = None) -> Training:
    from flows.tasks import hashed
    from opi.relations import Triple

    return Training([e.id for e in examples], hashed([Triple(e.context, e.question, e.answer) for e in examples],
                                                     content_hash), [e.relation for e in examples], cross_fit)


def prepared(config: OPIConfig) -> OPIConfig:
    """The configuration ready to run on its data (loaded and validated here): ``relations.gold`` decided, and the
    data has what the retrievers need. A DataError otherwise, before any work."""
    from flows.stores import check_stores
    from opi.data import DataError

    check_stores(config)
    data = load_data(config)
    needs_evidence = [r.name for r in config.members().values() if getattr(r, "needs_evidence", False)]
    if needs_evidence and not all(e.evidence for e in data.examples):
        missing = sum(not e.evidence for e in data.examples)
        raise DataError(f"the {needs_evidence[0]} retriever returns the chunks holding each example's gold evidence, "
                        f"and {missing} of {len(data.examples)} examples of {data.report.source} have none (an "
                        "'evidence' column): leave it out of the sweep for this data")
    return resolve_gold(config, data)


def resolve_gold(config: OPIConfig, data: Data) -> OPIConfig:
    """``config`` with ``relations.gold`` decided (see ``opi.relations.gold_source``); a notice when it was not
    given and the data has no labels; DataError when the request cannot be met."""
    from opi.data import DataError
    from opi.relations import gold_source

    trains = getattr(config.classifier, "trains", False)
    can_label = not trains or bool(getattr(config.classifier, "registered", None)) or bool(
        getattr(config.classifier, "train_path", None))
    try:
        source, notice = gold_source(config.relations.gold, data.labelled, can_label,
                                     getattr(config.classifier, "name", "configured"), data.report.source)
    except ValueError as err:
        raise DataError(str(err)) from None
    if notice and notice not in _NOTICES:  # once per process, not once per job of a sweep
        _NOTICES.add(notice)
        log.warning("%s", notice)
    config = dataclasses.replace(config, relations=dataclasses.replace(config.relations, gold=source))
    if source != "none":
        training_for(config, data)  # a one-relation training set is refused here, before any work
    return config


_NOTICES: set[str] = set()
_ARTICLES: dict[tuple, Any] = {}  # the chunked articles of the last dataset: every job of a sweep needs them


def task_runner(orchestration: OrchestrationConfig):
    """Prefect's thread pool, or prefect-dask's runner on a local cluster or a given scheduler."""
    if orchestration.runner == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=orchestration.max_workers)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        from opi.data import DataError

        raise DataError("orchestration=dask needs prefect-dask: pip install -e '.[dask]'") from None
    if orchestration.dask_address:
        return DaskTaskRunner(address=orchestration.dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": orchestration.dask_workers, "processes": True,
                                         "threads_per_worker": orchestration.dask_threads_per_worker,
                                         "dashboard_address": None})


def evaluate_flow(config: OPIConfig) -> dict[str, Any]:
    from prefect import flow

    # the configuration travels by closure, not as a flow parameter: Prefect keeps no copy of it (or of an
    # llm.base_url with credentials in it) in its database
    @flow(name="opi-evaluate", flow_run_name=describe(config).name, task_runner=task_runner(config.orchestration))
    def evaluate() -> dict[str, Any]:
        return run_configuration(config)

    return run_flow(evaluate)


def configuration_key(config: OPIConfig, data: Data, registered: str | None) -> str:
    """Everything a configuration's result depends on: its effective settings (not where runs are logged or how
    tasks are scheduled), the data's content (and the classifier's training data), the registered classifier
    version and the opi + flows sources."""
    from prefect.utilities.hashing import hash_objects

    from flows import tasks

    settings = {name: value for name, value in effective_settings(config).items()
                if name not in ("tracking", "orchestration", "paths")}
    settings["report"].pop("enabled")
    training = training_for(config, data) if config.relations.gold != "none" else None
    learned_from = None if training is None else (training.ids, training.triples.content_hash, training.labels)
    return "configuration-" + hash_objects(
        settings, config.paths.llm_cache, data.examples.content_hash, data.contexts.content_hash, learned_from,
        registered, tasks.code_version(with_flows=True), raise_on_failure=True)


def run_configuration(config: OPIConfig) -> dict[str, Any]:
    """One configuration's metrics and tables: kept whole under ``configuration_key`` (a re-run reads one result),
    else computed stage by stage (each stage cached on its own inputs, shared with other configurations)."""
    from flows import tasks

    data = load_data(config)
    cache_dir, started = config.paths.cache_dir, time.perf_counter()
    embedder = tasks.embedder_for(config.embedding)  # the process's shared one (on Dask, workers have their own)
    embedded_before = embedder.texts_embedded
    registered = resolve_registered(config)
    key = configuration_key(config, data, registered)
    kept = tasks.read_kept(cache_dir, key)
    if kept is not None:
        result = kept
        counts = {"cache_hits": kept["stages"], "cache_misses": 0, "seconds_lookup": time.perf_counter() - started}
    else:
        result, counts = run_stages(config, data, registered)
        tasks.keep(cache_dir, key, result)
    log.info("%s: %d of %d stage results reused from the cache%s", describe(config).name, counts["cache_hits"],
             result["stages"], " (the configuration's whole result, one read)" if kept is not None else "")
    metrics = {**result["metrics"], **counts,
               # embedding work in this job, and in this process so far (texts run through the model vs distinct)
               "texts_embedded": embedder.texts_embedded - embedded_before,
               "embedder_texts_embedded_total": embedder.texts_embedded,
               "embedder_unique_texts": embedder.unique_texts,
               "embedder_texts_requested_total": embedder.texts_embedded + embedder.cache_hits}
    return {"metrics": metrics, "predictions": result["predictions"], "per_relation": result["per_relation"]}


def chunked_articles(config: OPIConfig, data: Data, stages) -> dict:
    """Every article of the data, segmented and chunked (a cached task; read once per process), as the
    retrievers see them: one index per article, or one over the corpus."""
    from flows import tasks
    from opi import pipeline
    from prefect.utilities.hashing import hash_objects

    key = (data.contexts.content_hash, config.chunking.size, config.chunking.overlap, tasks.code_version())
    if key in _ARTICLES:  # one read of the cached result per process, not one per job (22 MB at 2,400 rows)
        stages.hits += 1
        articles = _ARTICLES[key]
    else:
        articles = tasks.hashed(stages.call("chunking", tasks.chunk_articles, data.contexts, *key[1:]))
        _ARTICLES.clear()
        _ARTICLES[key] = articles
    if config.retrieval.scope == "article":
        return articles
    corpus = tasks.HashedDict(pipeline.corpus_view(articles))
    corpus.content_hash = hash_objects("corpus", articles.content_hash)  # not the merged text once per article
    return corpus


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """A warning about the sweep's data, said once per process, not once per configuration."""
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("%s", message)


def relation_stages(config: OPIConfig, data: Data, applied: list, registered: str | None, stages) -> dict[str, Any]:
    """Gold relations (the data's, or the classifier's on the gold triples) and predicted ones (the classifier's
    on the generated answers); with ``relations.gold=none``, neither."""
    from flows import tasks
    from opi.classify import training_warnings
    from opi.relations import UNKNOWN, Triple

    examples = data.examples
    if config.relations.gold == "none":
        return {"examples": examples, "predicted": [None] * len(examples), "question_only": None, "metrics": {},
                "usage": {}}
    training = training_for(config, data)
    learned = (training.ids, training.triples, training.labels, training.cross_fit) if training else (
        [], tasks.hashed([]), [], False)
    common = (config.embedding, config.relations.set, config.seed, config.paths.llm_cache, tasks.code_version(),
              registered)
    ids = [e.id for e in examples]
    predicted = stages.call("classification", tasks.classify, config.classifier, config.llm, *learned, ids, applied,
                            *common)
    metrics, usage = dict(predicted["counts"]), dict(predicted["usage"])
    if config.relations.gold == "classifier":
        gold = stages.call("classification", tasks.classify, config.classifier, config.llm, *learned, ids,
                           tasks.hashed([Triple(e.context, e.question, e.answer) for e in examples]), *common)
        examples = [dataclasses.replace(e, relation=label if label != UNKNOWN else None)
                    for e, label in zip(examples, gold["predicted"])]
        usage = {k: usage.get(k, 0.0) + gold["usage"].get(k, 0.0) for k in {*usage, *gold["usage"]}}
    # how much of LRCR the question alone explains: the same classifier, text and answer blanked (one result a sweep)
    question_only = stages.call("classification", tasks.classify, config.classifier, config.llm, *learned, ids,
                                tasks.hashed([Triple("", e.question, "") for e in examples]), *common)
    usage = {k: usage.get(k, 0.0) + question_only["usage"].get(k, 0.0) for k in {*usage, *question_only["usage"]}}
    if training is not None:  # the same for every configuration of a sweep: one cached result
        metrics["classifier_cv_accuracy"] = stages.call(
            "classification", tasks.classifier_accuracy, config.classifier, *learned[:3], config.embedding,
            config.seed, tasks.code_version())
        for warning in training_warnings(training.labels, metrics["classifier_cv_accuracy"]):
            warn_once(warning)
    return {"examples": examples, "predicted": predicted["predicted"], "question_only": question_only["predicted"],
            "metrics": metrics, "usage": usage}


def run_stages(config: OPIConfig, data: Data, registered: str | None) -> tuple[dict[str, Any], dict[str, float]]:
    """All stages of one configuration, as cached task calls: (result, this run's cache counts and seconds)."""
    from flows import tasks
    from opi import pipeline
    from opi.metrics.configuration import configuration_metrics, usage_totals
    from opi.relations import Triple

    examples, code, emb, llm_cache = data.examples, tasks.code_version(), config.embedding, config.paths.llm_cache
    stages = tasks.StageCalls(config.paths.cache_dir, quote_inputs=config.orchestration.runner == "threads")
    articles = chunked_articles(config, data, stages)
    member_rankings = stages.call_many("retrieval", tasks.rank, *[(retriever, examples, articles, emb, code)
                                                                 for retriever in config.members().values()])
    retrieved = pipeline.combine(config.combination, member_rankings, examples, articles)
    texts = [pipeline.sentence_texts(e, articles, retrieved[e.id]) for e in examples]
    questions = [e.question for e in examples]
    generation = stages.call("generation", tasks.answer, config.llm, questions, texts, emb, llm_cache, code)
    answers = generation["answers"]
    applied = tasks.hashed([Triple(" ".join(t), e.question, a) for e, t, a in zip(examples, texts, answers)])
    relations = relation_stages(config, data, applied, registered, stages)
    similarities = stages.call("scoring", tasks.answer_similarity, [e.answer for e in examples], answers, emb, code)
    rows = pipeline.prediction_rows(relations["examples"], retrieved, texts, answers, relations["predicted"],
                                    similarities, articles if config.retrieval.scope == "corpus" else None)
    if relations["question_only"] is not None:
        rows["predicted_relation_question_only"] = relations["question_only"]
    quality = {"columns": {}, "counts": {}, "usage": {}}
    if config.metrics.correctness or config.metrics.judge:
        quality = stages.call("answer-metrics", tasks.answer_quality, config.metrics, config.llm, questions,
                              [e.answer for e in examples], answers, similarities, llm_cache, code)
        rows = pipeline.with_scores(rows, quality["columns"])
    metrics, table = configuration_metrics(rows, data.relation_set.labels, config.metrics.betas,
                                           config.metrics.beta, config.report.confidence, config.report.resamples,
                                           config.seed)
    usage = {**generation["usage"], **relations["usage"], **quality["usage"]}
    metrics.update({**relations["metrics"], **quality["counts"], **usage, **usage_totals(usage),
                    "rows_dropped": float(sum(data.report.dropped.values()))})
    return ({"metrics": metrics, "predictions": rows, "per_relation": table, "stages": stages.hits + stages.misses},
            stages.counts())


def scrub_hydra_outputs() -> None:
    """Hydra saved this job's config and overrides (and a sweep's multirun.yaml) as given: without credentials."""
    from hydra.core.hydra_config import HydraConfig

    from flows.secrets import scrub_files

    if not HydraConfig.initialized():
        return
    hydra_config = HydraConfig.get()
    output = Path(hydra_config.runtime.output_dir)
    scrub_files(*(output / ".hydra").glob("*.yaml"), Path(hydra_config.sweep.dir) / "multirun.yaml")


def record(config: OPIConfig, result: dict) -> None:
    """The configuration's predictions and table in the Hydra output folder, and its MLflow run."""
    output = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    # write-then-rename: a run killed mid-write leaves no half file under a final name
    write_atomically(output / "predictions.parquet", lambda path: result["predictions"].to_parquet(path, index=False))
    write_atomically(output / "per_relation.csv", lambda path: result["per_relation"].to_csv(path, index=False))
    if config.tracking.enabled:
        from flows.tracking import log_run

        identity = describe(config)
        run_id = log_run(config.tracking, identity.name, effective_settings(config), result["metrics"],
                         {"predictions.parquet": result["predictions"], "per_relation.csv": result["per_relation"]},
                         {"opi.role": "configuration", "gold_relation_source": config.relations.gold,
                          **identity.tags(), **prompt_tags(config)})
        log.info("MLflow run %s", run_id)


def write_atomically(path: Path, write) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")  # one name per writer
    write(partial)
    os.replace(partial, path)


def stop(signum: int, frame) -> None:
    """SIGTERM: end waits on LLM requests, then exit through the exit handlers."""
    from opi.llm.client import stop_requests

    stop_requests()
    sys.exit(128 + signum)


def main() -> None:
    """Console entry point."""
    # SIGTERM (a scheduler, `kill`) ends the run like Ctrl-C does: through exit handlers, so the servers this
    # process started are stopped and its MLflow runs closed, instead of being left behind
    signal.signal(signal.SIGTERM, stop)
    flows.command_start()
    hydra_command(evaluate_job)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def evaluate_job(cfg: DictConfig) -> float:
    started = time.perf_counter()
    scrub_hydra_outputs()
    config = checked(cfg)
    identity = describe(config)
    # data problems stop here, before Prefect and before any stage
    config = run_or_explain(prepared, config)
    run_or_explain(start_prefect_server_early)  # in a multirun, already booting since the sweep's data was found good
    result = run_or_explain(evaluate_flow, config)
    metrics = result["metrics"]
    metrics["seconds_total"] = time.perf_counter() - started
    run_or_explain(record, config, result)
    progress = finished_one()
    if "lrcr" in metrics:
        log.info("%s%s: BERTSim %.4f  LRCR %.4f  OPI-1 %.4f  (%.1f s)", progress, identity.name, metrics["bertsim"],
                 metrics["lrcr"], metrics["opi_1"], metrics["seconds_total"])
    else:
        log.info("%s%s: BERTSim %.4f  (no gold relations: no LRCR or OPI)  (%.1f s)", progress, identity.name,
                 metrics["bertsim"], metrics["seconds_total"])
    return metrics.get("opi", metrics["bertsim"])


if __name__ == "__main__":  # python -m flows.evaluate: run as the imported module, so that its caches are shared
    from flows import evaluate  # with the sweep callbacks, which import it by name

    evaluate.main()
