"""``opi-eval``: the Hydra entry point. Each job (one configuration) is one Prefect flow run and one MLflow run.

    opi-eval                                   # kNN, extractive reader, local classifier, bundled data
    opi-eval experiment=paper_grid             # the paper's 13 configurations under one parent run
    opi-eval -m retriever=glob(*) chunking=paper,small
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import flows  # noqa: F401  (environment defaults before prefect/mlflow import)
import hydra
from omegaconf import DictConfig

from flows.entry import checked, run_or_explain
from flows.prefect_runtime import run_flow, start_prefect_server_early
from opi.schemas import register_configs

log = logging.getLogger("opi")
CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")
DISPLAY = {"dps": "DPS", "knn": "kNN", "bm25": "BM25", "svm": "SVM", "tfidf": "TF-IDF", "mmr": "MMR", "edi": "EDI"}

register_configs()


def run_name(cfg: dict[str, Any]) -> str:
    combination = cfg["combination"]
    setup = DISPLAY[cfg["retriever"]["name"]] if combination["mode"] == "single" else combination["name"]
    return f"{setup} | {cfg['llm']['name']} | {cfg['classifier']['name']}"


def prompt_tags(cfg: dict[str, Any]) -> dict[str, str]:
    """Which prompt texts (by content hash) produced this run's LLM answers and labels."""
    from opi.llm.prompts import load_prompt

    tags = {}
    if cfg["llm"]["kind"] == "openai":
        tags["opi.prompt.answer"] = load_prompt("answer").version
        if cfg["classifier"]["kind"] != "local":
            tags["opi.prompt.relation"] = load_prompt("relation").version
    return tags


def resolve_registered(cfg: dict[str, Any]) -> str | None:
    """``models:/name@alias`` -> ``models:/name/<version>``, so that a new version under the alias is not served
    from the cache of the old one."""
    uri = cfg["classifier"].get("registered")
    if cfg["classifier"]["kind"] != "local" or not uri:
        return None
    from flows.tracking import _mlflow

    mlflow = _mlflow(cfg["tracking"])
    name, _, alias = uri.removeprefix("models:/").partition("@")
    if not alias:
        return uri
    version = mlflow.MlflowClient().get_model_version_by_alias(name, alias).version
    log.info("relation classifier %s is version %s (no cross-fitting: it was trained elsewhere)", uri, version)
    return f"models:/{name}/{version}"


def member_specs(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    if cfg["combination"]["mode"] == "single":
        return [cfg["retriever"]]
    return [cfg["retrievers"][name] for name in cfg["combination"]["members"]]


@dataclass(frozen=True)
class Data:
    """A configuration's data, validated; the parts every stage task receives are hashed once (tasks.hashed)."""

    relation_set: Any
    examples: list  # the evaluated examples
    pool: list  # the classifier's training pool: the same source, unfiltered
    report: Any
    contexts: list  # the pool's distinct articles, sorted
    pool_triples: list
    pool_ids: list[str]
    pool_labels: list[str]


def load_data(cfg: dict[str, Any]) -> Data:
    import json

    return _load_data(json.dumps({"dataset": cfg["dataset"], "relations": cfg["relations"], "seed": cfg["seed"]}))


@lru_cache(maxsize=4)  # jobs of one multirun share the dataset: read, validate and hash it once
def _load_data(key: str) -> Data:
    import json

    from flows.tasks import hashed
    from opi.classify import Triple
    from opi.data import load_examples
    from opi.relations import load_relation_set

    cfg = json.loads(key)
    relation_set = load_relation_set(cfg["relations"]["set"])
    d = cfg["dataset"]
    common = dict(kind=d["kind"], name=d["name"], path=d["path"], columns=d["columns"], labels_path=d["labels_path"],
                  label_join=d["label_join"], hub_repo=d["hub_repo"], split=d["split"], label_set=relation_set.labels,
                  seed=cfg["seed"], on_invalid=d["on_invalid"], max_context_words=d["max_context_words"])
    examples, report = load_examples(**common, relations=d["relations"], sample=d["sample"], limit=d["limit"])
    pool, _ = load_examples(**common)
    log.info("%s; evaluating %d examples", report.describe(), len(examples))
    return Data(relation_set, hashed(examples), pool, report, hashed(sorted({e.context for e in pool})),
                hashed([Triple(e.context, e.question, e.answer) for e in pool]), [e.id for e in pool],
                [e.relation for e in pool])


_ARTICLES: dict[tuple, Any] = {}  # the chunked articles of the last dataset: every job of a sweep needs them


def task_runner(orchestration: dict[str, Any]):
    """Prefect's thread pool, or prefect-dask's runner on a local cluster or a given scheduler."""
    if orchestration["runner"] == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=orchestration["max_workers"])
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        from opi.data import DataError

        raise DataError("orchestration=dask needs prefect-dask: pip install -e '.[dask]'") from None
    if orchestration["dask_address"]:
        return DaskTaskRunner(address=orchestration["dask_address"])
    return DaskTaskRunner(cluster_kwargs={"n_workers": orchestration["dask_workers"], "processes": True,
                                         "threads_per_worker": orchestration["dask_threads_per_worker"],
                                         "dashboard_address": None})


def evaluate_flow(cfg: dict[str, Any]) -> dict[str, Any]:
    from prefect import flow

    @flow(name="opi-evaluate", flow_run_name=run_name(cfg), validate_parameters=False,
          task_runner=task_runner(cfg["orchestration"]))
    def evaluate(cfg: dict[str, Any]) -> dict[str, Any]:
        return run_configuration(cfg)

    return run_flow(evaluate, cfg)


def configuration_key(cfg: dict[str, Any], data: Data, registered: str | None) -> str:
    """Everything a configuration's result depends on: its settings (not where runs are logged or how tasks are
    scheduled), the data's content, the registered classifier version and the opi + flows sources."""
    from prefect.utilities.hashing import hash_objects

    from flows import tasks

    settings = {name: value for name, value in cfg.items() if name not in ("tracking", "orchestration", "paths")}
    settings["report"] = {name: value for name, value in cfg["report"].items() if name != "enabled"}
    return "configuration-" + hash_objects(
        settings, cfg["paths"]["llm_cache"], data.examples.content_hash, data.pool_triples.content_hash,
        data.pool_ids, data.pool_labels, registered, tasks.code_version(with_flows=True), raise_on_failure=True)


def run_configuration(cfg: dict[str, Any]) -> dict[str, Any]:
    """One configuration's metrics and tables: kept whole under ``configuration_key`` (a re-run reads one result),
    else computed stage by stage (each stage cached on its own inputs, shared with other configurations)."""
    from flows import tasks

    data = load_data(cfg)
    cache_dir, started = cfg["paths"]["cache_dir"], time.perf_counter()
    embedder = tasks.embedder_for(cfg["embedding"])  # the process's shared one (on Dask, workers have their own)
    embedded_before = embedder.texts_embedded
    registered = resolve_registered(cfg)
    key = configuration_key(cfg, data, registered)
    kept = tasks.read_kept(cache_dir, key)
    if kept is not None:
        result = kept
        counts = {"cache_hits": kept["stages"], "cache_misses": 0, "seconds_lookup": time.perf_counter() - started}
    else:
        result, counts = run_stages(cfg, data, registered)
        tasks.keep(cache_dir, key, result)
    log.info("%s: %d of %d stage results reused from the cache%s", run_name(cfg), counts["cache_hits"],
             result["stages"], " (the configuration's whole result, one read)" if kept is not None else "")
    metrics = {**result["metrics"], **counts,
               # embedding work in this job, and in this process so far (texts run through the model vs distinct)
               "texts_embedded": embedder.texts_embedded - embedded_before,
               "embedder_texts_embedded_total": embedder.texts_embedded,
               "embedder_unique_texts": embedder.unique_texts,
               "embedder_texts_requested_total": embedder.texts_embedded + embedder.cache_hits}
    return {"metrics": metrics, "predictions": result["predictions"], "per_relation": result["per_relation"]}


def run_stages(cfg: dict[str, Any], data: Data, registered: str | None) -> tuple[dict[str, Any], dict[str, float]]:
    """All stages of one configuration: (result, this run's cache counts and stage seconds)."""
    from prefect.states import State
    from prefect.utilities.annotations import quote

    from flows import tasks
    from opi import pipeline
    from opi.classify import Triple
    from opi.diagnostics import COLUMNS as DIAGNOSTIC_COLUMNS
    from opi.metrics.opi import pooled_opi, summary
    from opi.metrics.stats import confidence_intervals
    import pandas as pd

    relation_set, examples, report = data.relation_set, data.examples, data.report
    cache_dir, code, emb = cfg["paths"]["cache_dir"], tasks.code_version(), cfg["embedding"]
    hits = misses = 0
    seconds: dict[str, float] = {}
    # quote(): our inputs are plain data, never futures, so Prefect need not walk them (seconds per warm grid). Not on
    # Dask, whose graphs read the annotation (a tuple) as a task.
    wrap = quote if cfg["orchestration"]["runner"] == "threads" else (lambda value: value)

    def call_many(stage: str, task_fn, *calls: tuple) -> list:
        """Submit the calls to the flow's task runner together, then collect their results in order."""
        nonlocal hits, misses
        started = time.perf_counter()
        futures = [tasks.cached(task_fn, cache_dir).submit(*map(wrap, args)) for args in calls]
        results = []
        for future in futures:
            future.wait()
            state: State = future.state
            if state.name == "Cached":
                hits += 1
            else:
                misses += 1
            results.append(state.result())
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - started
        return results

    def call(stage: str, task_fn, *args):
        return call_many(stage, task_fn, args)[0]

    chunking = (data.contexts.content_hash, cfg["chunking"]["size"], cfg["chunking"]["overlap"], code)
    if chunking in _ARTICLES:  # one read of the cached result per process, not one per job (22 MB at 2,400 rows)
        articles, hits = _ARTICLES[chunking], hits + 1
    else:
        articles = tasks.hashed(call("chunking", tasks.chunk_articles, data.contexts, *chunking[1:]))
        _ARTICLES.clear()
        _ARTICLES[chunking] = articles
    member_rankings = call_many("retrieval", tasks.rank,
                                *[(spec, examples, articles, emb, code) for spec in member_specs(cfg)])
    combination = cfg["combination"]
    retrieved = pipeline.combine(combination["mode"], member_rankings, examples, articles, combination["k"],
                                 combination["c"], combination["weights"])
    texts = [pipeline.sentence_texts(e, articles, retrieved[e.id]) for e in examples]
    llm_cache = cfg["paths"]["llm_cache"]
    generation = call("generation", tasks.answer, cfg["llm"], [e.question for e in examples], texts, emb,
                      llm_cache, code)
    answers = generation["answers"]
    pool_triples, pool_ids, pool_labels = data.pool_triples, data.pool_ids, data.pool_labels
    apply_triples = [Triple(" ".join(t), e.question, a) for e, t, a in zip(examples, texts, answers)]
    classification = call("classification", tasks.classify, cfg["classifier"], cfg["llm"], pool_ids, pool_triples,
                          pool_labels, [e.id for e in examples], apply_triples, emb, cfg["relations"]["set"],
                          cfg["seed"], llm_cache, code, registered)
    predicted = classification["predicted"]
    accuracy = None
    if cfg["classifier"]["kind"] == "local" and not registered:
        accuracy = call("classification", tasks.classifier_accuracy, cfg["classifier"], pool_ids, pool_triples,
                        pool_labels, emb, cfg["seed"], code)
    similarities = call("scoring", tasks.answer_similarity, [e.answer for e in examples], answers, emb, code)

    rows = pipeline.prediction_rows(examples, retrieved, texts, answers, predicted, similarities)
    quality: dict[str, Any] = {"columns": {}, "counts": {}, "usage": {}}
    if cfg["metrics"]["correctness"] or cfg["metrics"]["judge"]:
        quality = call("answer-metrics", tasks.answer_quality, cfg["metrics"], cfg["llm"],
                       [e.question for e in examples], [e.answer for e in examples], answers, similarities,
                       llm_cache, code)
        for column, values in quality["columns"].items():
            rows[column] = pd.array(values, dtype="Float64")  # missing (unparsable) stays missing, never NaN-mean
    metrics, table = summary(rows, relation_set.labels, cfg["metrics"]["betas"])
    for column in quality["columns"]:
        scored = rows[column].dropna()
        if len(scored):
            metrics[column if column != "judge_score" else "judge_mean"] = float(scored.mean())
    metrics.update({**quality["counts"], **quality["usage"]})
    metrics["opi"] = pooled_opi(table, cfg["metrics"]["beta"])
    bootstrap = cfg["report"]
    for name, interval in confidence_intervals(rows, cfg["metrics"]["beta"], bootstrap["confidence"],
                                               bootstrap["resamples"], cfg["seed"]).items():
        metrics[f"{name}_ci_low"], metrics[f"{name}_ci_high"] = interval.low, interval.high
    for record in table.to_dict("records"):
        for key, value in record.items():
            if key != "relation":
                metrics[f"{key}.{record['relation']}"] = float(value)
    if accuracy is not None:
        metrics["classifier_cv_accuracy"] = accuracy
    usage = {**generation["usage"], **classification["usage"]}
    metrics.update(usage)
    if usage:
        metrics["llm_cost_usd"] = usage.get("llm_answer_cost_usd", 0.0) + usage.get("llm_classify_cost_usd", 0.0)
        metrics["llm_tokens"] = sum(v for k, v in usage.items() if k.endswith("_tokens"))
        metrics["unknown_relations"] = float(sum(p == "unknown" for p in predicted))
    metrics.update({
        "rows_dropped": float(sum(report.dropped.values())),
        "retrieved_sentences_mean": float(rows["retrieved_sentences"].mean()),
        "retrieved_words_mean": float(rows["retrieved_words"].mean()),
        **{column: float(rows[column].mean()) for column in DIAGNOSTIC_COLUMNS if rows[column].notna().any()},
    })
    counts = {"cache_hits": hits, "cache_misses": misses, **{f"seconds_{stage}": s for stage, s in seconds.items()}}
    return {"metrics": metrics, "predictions": rows, "per_relation": table, "stages": hits + misses}, counts


def write_atomically(path: Path, write) -> None:
    partial = path.with_name(f".{path.name}.partial")
    write(partial)
    os.replace(partial, path)


def main() -> None:
    """Console entry point."""
    # SIGTERM (a scheduler, `kill`) ends the run like Ctrl-C does: through exit handlers, so the servers this
    # process started are stopped and its MLflow runs closed, instead of being left behind
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    start_prefect_server_early()
    evaluate_job()


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def evaluate_job(cfg: DictConfig) -> float:
    started = time.perf_counter()
    config = checked(cfg)
    run_or_explain(load_data, config)  # a data problem stops here, before Prefect and before any stage
    result = run_or_explain(evaluate_flow, config)
    metrics = result["metrics"]
    metrics["seconds_total"] = time.perf_counter() - started
    output = Path(hydra.core.hydra_config.HydraConfig.get().runtime.output_dir)
    # write-then-rename: a run killed mid-write leaves no half file under a final name
    write_atomically(output / "predictions.parquet", lambda path: result["predictions"].to_parquet(path, index=False))
    write_atomically(output / "per_relation.csv", lambda path: result["per_relation"].to_csv(path, index=False))
    if config["tracking"]["enabled"]:
        from flows.tracking import log_run

        run_id = log_run(config["tracking"], run_name(config), config, metrics,
                         {"predictions.parquet": result["predictions"], "per_relation.csv": result["per_relation"]},
                         {"opi.role": "configuration", "opi.setup": run_name(config).split(" | ")[0],
                          **prompt_tags(config)})
        log.info("MLflow run %s", run_id)
    log.info("%s: BERTSim %.4f  LRCR %.4f  OPI-1 %.4f  (%.1f s)", run_name(config), metrics["bertsim"],
             metrics["lrcr"], metrics["opi_1"], metrics["seconds_total"])
    return metrics["opi"]


if __name__ == "__main__":
    main()
