"""Where a configuration's results go: its predictions, per-relation table and metrics in Hydra's output folder
(written whole or not at all) and, with tracking on, its MLflow run: named by its retrieval (a sweep's parent
renames its children by what varies in the sweep, ``flows.tracking.sweep_report``), described by its tags."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from hydra.core.hydra_config import HydraConfig

from flows.orchestration.files import write_atomically
from flows.run.identity import component_embeddings, describe, effective_settings, live_stores
from flows.run.race import race_tags
from flows.run.redaction import scrub_files
from flows.tracking.runs import METRICS_FILE, log_run, metrics_json
from flows.tracking.traces import TraceContext, TraceCount, write_traces
from opi.llm.prompts import load_prompt
from opi.schemas import OPIConfig
from opi.trace_records import traced_ids
from opi.yardstick import yardstick_tags

log = logging.getLogger("opi")


def scrub_hydra_outputs() -> None:
    """Hydra saved this job's config and overrides (and a sweep's multirun.yaml) as given: without credentials."""
    if not HydraConfig.initialized():
        return
    hydra_config = HydraConfig.get()
    output = Path(hydra_config.runtime.output_dir)
    scrub_files(*(output / ".hydra").glob("*.yaml"), Path(hydra_config.sweep.dir) / "multirun.yaml")


def prompt_tags(config: OPIConfig) -> dict[str, str]:
    """Which prompt texts (by content hash) produced this run's LLM answers and labels."""
    tags = {}
    if config.llm.endpoint and hasattr(config.llm.reader, "prompt"):
        tags["opi.prompt.answer"] = load_prompt(config.llm.reader.prompt).version
    if config.classifier.asked_prompt:
        tags["opi.prompt.relation"] = load_prompt(config.classifier.asked_prompt).version
    return tags


def embedding_tags(config: OPIConfig) -> dict[str, str]:
    """The yardstick BERTSim was measured with, and the embedding model of each component that embeds."""
    return {**yardstick_tags(config.metrics.similarity),
            **{f"opi.embedding.{path}": settings.model for path, settings in component_embeddings(config).items()}}


def store_tags(config: OPIConfig) -> dict[str, str]:
    """The vector store a configuration evaluated (``retriever=vectorstore``): where, and its server's version."""
    live = live_stores(config)
    return {"opi.vectorstore": live[0].where, "opi.vectorstore.server": live[0].client().version()} if live else {}


def record(config: OPIConfig, result: dict) -> None:
    """The configuration's predictions, table and metrics in the Hydra output folder, and its MLflow run."""
    output = Path(HydraConfig.get().runtime.output_dir)
    write_atomically(output / "predictions.parquet", lambda path: result["predictions"].to_parquet(path, index=False))
    write_atomically(output / METRICS_FILE, lambda path: path.write_text(metrics_json(result["metrics"])))
    tables = {"predictions.parquet": result["predictions"]}
    if not result["per_relation"].empty:  # no gold relations: no per-relation table, no empty file
        tables["per_relation.csv"] = result["per_relation"]
        write_atomically(output / "per_relation.csv", lambda path: result["per_relation"].to_csv(path, index=False))
    if config.tracking.enabled:
        identity = describe(config)
        run_id = log_run(config.tracking, identity.retrieval, effective_settings(config), result["metrics"], tables,
                         {"opi.role": "configuration", "gold_relation_source": config.relations.gold,
                          **identity.tags(), **identity.description_tags(), **prompt_tags(config),
                          **embedding_tags(config), **store_tags(config), **race_tags(config)},
                         traces=trace_writer(config, result))
        log.info("MLflow run %s", run_id)


def trace_writer(config: OPIConfig, result: dict) -> Callable[[str, str], TraceCount] | None:
    """What writes this configuration's traces into its run (``tracking.traces``): None for none."""
    rows = result["predictions"]
    if config.tracking.traced == 0 or rows.empty:
        return None
    identity = describe(config)
    classifier = identity.classifier
    asks_llm = classifier is not None and config.classifier.asks_llm and not config.classifier.registered
    classifier_source = (("LLM_JUDGE", config.classifier.model or config.llm.model or "llm")
                         if asks_llm else ("CODE", classifier or "none"))
    k = config.retriever.k if config.single else getattr(config.combination, "k", None)
    ids = traced_ids(list(rows["id"]), list(rows["relation"]), config.tracking.traced, config.seed)

    def write(experiment_id: str, run_id: str) -> TraceCount:
        context = TraceContext(
            experiment_id, run_id, identity.name, identity.retrieval, identity.reader, classifier,
            classifier_source, ("HUMAN", "dataset labels") if config.relations.gold == "labels" else classifier_source,
            ("LLM_JUDGE", config.llm.model or config.llm.name), config.metrics.similarity.model, k,
            not result["metrics"].get("cache_misses"))
        return write_traces(config.tracking.tracking_uri, context, rows, result["traces"], ids,
                            None if live_stores(config) else result.get("key"))

    return write
