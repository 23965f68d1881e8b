"""Per-example MLflow traces of a configuration run, where MLflow 3 users look (the run's Traces tab, the
experiment's GenAI view): one trace per example, with a RETRIEVER span (the chunks handed on as documents), a
reader span and a classifier span, and the example's assessments (the gold answer, relation and evidence as
expectations; BERTSim, relation correctness, the retrieval and answer scores as feedback). Built from the result's
rows and ``opi.trace_records`` only, so a configuration read whole from the cache gets its traces too.

Every span of a trace starts and ends at one instant: OPI runs each stage for all examples at once, so no
per-example time is measured, and a duration would be made up (the time MLflow took to store the spans); the
root's ``opi.timing`` says so, and the run's ``seconds_<stage>`` metrics are the stages' real times.

Public MLflow APIs only, and nothing lost on a local SQLite store: spans are created with their times
(``mlflow.start_span_no_context``), the assessments logged once the trace is in the store (a trace whose
assessments could not be written is deleted and written again); a run's few traces are written synchronously,
more through MLflow's asynchronous writer with one worker on SQLite (more only contend for its one writer; 4 on a
server), its queue flushed every ``BATCH`` traces (a full queue drops traces); then the run's traces are counted
in the store and any example missing is written again. What still fails is counted (``traces_failed``) and said in
one line; it never fails the run.

A configuration read whole from the cache has the same traces as the run that computed it (same result, examples,
names and trace code: ``traces_key``). Its run links that run's traces (MLflow's ``link_traces_to_run``: they are
listed in its Traces tab, each still naming the run that wrote it) instead of writing them again, which costs
~1.6 s a configuration on SQLite; ``traces_linked`` and the tag ``opi.traces.from_run`` say so. With no such run
whole in the experiment (deleted, or another store), they are written.""" 
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from opi.metrics.names import BERTSIM

log = logging.getLogger("opi")
BATCH = 100  # traces queued before a flush: each is ~5 export tasks, within MLflow's queue of 1,000
ATTEMPTS = 3  # writes of an example whose trace did not reach the store
EXAMPLE_TAG = "opi.example_id"
KEY_TAG = "opi.traces.key"  # of every run whose traces are whole in the store: what they show (``traces_key``)
FROM_TAG = "opi.traces.from_run"  # of a run that linked another run's traces
LINKS_PER_CALL = 100  # MLflow's limit for one link_traces_to_run


@dataclass(frozen=True)
class TraceCount:
    expected: int
    written: int  # in the store for this run: written by it, or linked
    linked_from: str | None = None  # the run whose traces were linked
    key: str | None = None  # ``traces_key``

    @property
    def failed(self) -> int:
        return self.expected - self.written

    def metrics(self) -> dict[str, float]:
        return {"traces_expected": float(self.expected), "traces_written": float(self.written),
                "traces_failed": float(self.failed), "traces_linked": float(self.written if self.linked_from else 0)}

    def tags(self) -> dict[str, str]:
        whole = self.key is not None and not self.failed
        return {**({KEY_TAG: self.key} if whole else {}), **({FROM_TAG: self.linked_from} if self.linked_from else {})}


@dataclass(frozen=True)
class TraceContext:
    """What every trace of one configuration run shares."""
    experiment_id: str
    run_id: str
    configuration: str  # the run's name
    retrieval: str  # the RETRIEVER span's name: kNN, A-Four, kNN > cross-encoder
    reader: str  # llm.name
    classifier: str | None  # None: no relations
    classifier_source: tuple[str, str]  # (assessment source type, id) of relation_correct
    gold_source: tuple[str, str]  # of the gold relation: the data's labels (HUMAN) or the classifier's
    judge_source: tuple[str, str]
    yardstick: str
    k: int | None  # the configuration's cut: its recall@k and nDCG@k are assessed
    result_from_cache: bool


_CONFIGURED: dict[str, object] = {}
ASYNC = "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"


def configure(tracking_uri: str, asynchronous: bool) -> None:
    """MLflow's tracer writes to ``tracking_uri``: synchronously for a run's few traces (measured: 13 traces in
    ~1.0 s against ~1.8 s through the asynchronous writer, whose flush waits up to a second for its idle worker),
    else asynchronously with a worker count and queue that lose nothing. A user's own MLFLOW_*TRACE_LOGGING*
    settings win. The tracer is rebuilt only when the store or the mode changes."""
    import mlflow

    if "user_async" not in _CONFIGURED:
        _CONFIGURED["user_async"] = os.environ.get(ASYNC)
    if _CONFIGURED["user_async"] is None:
        os.environ[ASYNC] = "true" if asynchronous else "false"
    os.environ.setdefault("MLFLOW_ASYNC_TRACE_LOGGING_MAX_WORKERS", "1" if tracking_uri.startswith("sqlite:") else "4")
    os.environ.setdefault("MLFLOW_ASYNC_TRACE_LOGGING_MAX_QUEUE_SIZE", str(20 * BATCH))
    wanted = (tracking_uri, os.environ.get(ASYNC))
    if _CONFIGURED.get("tracer") != wanted:
        mlflow.set_tracking_uri(tracking_uri)
        if "tracer" in _CONFIGURED:
            mlflow.tracing.reset()
        _CONFIGURED["tracer"] = wanted


def present(value: Any) -> bool:
    return value is not None and value is not pd.NA and not (isinstance(value, float) and math.isnan(value))


TIMING = ("not measured per example: OPI runs each stage for all examples at once (the run's seconds_<stage> "
          "metrics are the stages' times), so this trace's spans have no duration")


def _span(parent, name: str, span_type: str, when: int, inputs: Any, outputs: Any, attributes: dict) -> None:
    """A child span of ``parent`` at the instant ``when``: it starts and ends there (no duration)."""
    import mlflow

    span = mlflow.start_span_no_context(name, span_type=span_type, parent_span=parent, inputs=inputs,
                                        attributes=attributes, start_time_ns=when)
    span.end(outputs=outputs, end_time_ns=when)


def _write_spans(context: TraceContext, row: pd.Series, record: dict[str, Any]) -> str:
    """The example's trace (its spans, all at one instant: no per-example time is measured), written when its root
    ends; returns its id."""
    import mlflow
    from mlflow.entities import Document, SpanType
    from mlflow.tracing.constant import TraceMetadataKey

    when, answer = time.time_ns(), row["generated_answer"] if present(row["generated_answer"]) else None
    root = mlflow.start_span_no_context(
        "opi-example", span_type=SpanType.CHAIN, inputs={"question": row["question"]},
        attributes={EXAMPLE_TAG: row["id"], "opi.configuration": context.configuration, "opi.timing": TIMING},
        tags={EXAMPLE_TAG: str(row["id"]), "opi.configuration": context.configuration},
        metadata={TraceMetadataKey.SOURCE_RUN: context.run_id}, experiment_id=context.experiment_id,
        start_time_ns=when)
    documents = [Document(page_content=d["text"], id=str(d["chunk_id"]), metadata={
        k: d[k] for k in ("chunk_id", "article_id", "score", "rank", "retriever")}).to_dict()
        for d in record["documents"]]
    _span(root, context.retrieval, SpanType.RETRIEVER, when, {"query": row["question"]}, documents,
          {"opi.sentences": record["sentences"]})  # the complete sentences handed on
    call = record["reader"]
    inputs = {"question": row["question"], "sentences": record["sentences"],
              **({"prompt": call["prompt"]} if call else {})}
    _span(root, context.reader, SpanType.CHAT_MODEL if call else "READER", when, inputs, answer,
          reader_attributes(context, call))
    if context.classifier is not None and present(row["predicted_relation"]):
        _span(root, context.classifier, "CLASSIFIER", when, {"question": row["question"], "answer": answer},
              {"relation": row["predicted_relation"]},
              {"opi.raw_reply": record["classifier_reply"]} if record["classifier_reply"] is not None else {})
    root.end(outputs={"answer": answer}, end_time_ns=when)
    return root.trace_id


def reader_attributes(context: TraceContext, call: dict | None) -> dict[str, Any]:
    if call:
        return {"opi.cached": call["cached"], "mlflow.chat.tokenUsage": {
            "input_tokens": call["prompt_tokens"], "output_tokens": call["completion_tokens"],
            "total_tokens": call["prompt_tokens"] + call["completion_tokens"]}}
    return {"opi.reader": "not an LLM: the retrieved sentences closest to the question"
            if context.reader == "extractive" else context.reader, "opi.cached": context.result_from_cache}


def _write_assessments(context: TraceContext, row: pd.Series, record: dict[str, Any], trace_id: str) -> None:
    """The example's expectations and feedback on its trace, once the trace is in the store."""
    import mlflow
    from mlflow.entities import AssessmentSource

    data = AssessmentSource("HUMAN", "dataset")
    mlflow.log_expectation(trace_id=trace_id, name="expected_response", value=row["answer"], source=data)
    if present(row["relation"]):
        mlflow.log_expectation(trace_id=trace_id, name="gold_relation", value=row["relation"],
                               source=AssessmentSource(*context.gold_source))
    if record["evidence"]:
        mlflow.log_expectation(trace_id=trace_id, name="gold_evidence", value=record["evidence"], source=data)
    for name, value, rationale, source in feedback(context, row, AssessmentSource("CODE", "opi")):
        mlflow.log_feedback(trace_id=trace_id, name=name, value=value, rationale=rationale, source=source)


def feedback(context: TraceContext, row: pd.Series, code) -> list[tuple[str, Any, str | None, Any]]:
    """(name, value, rationale, source) of each per-example score the row holds."""
    from mlflow.entities import AssessmentSource

    scores: list[tuple[str, Any, str | None, Any]] = []
    if present(row["similarity"]):
        scores.append((BERTSIM, round(float(row["similarity"]), 6),
                       f"cosine of the gold and the generated answer's embeddings by {context.yardstick}", code))
    if present(row["relation"]) and present(row["predicted_relation"]):
        scores.append(("relation_correct", int(row["predicted_relation"] == row["relation"]),  # 1/0: averaged
                       f"{context.classifier} named '{row['predicted_relation']}', the gold relation is "
                       f"'{row['relation']}'", AssessmentSource(*context.classifier_source)))
    if present(row["answer_found"]):
        scores.append(("answer_found", int(bool(row["answer_found"])),
                       "the gold answer's words are in the sentences handed on", code))
    at_k = [f"recall_at_{context.k}", f"ndcg_at_{context.k}"] if context.k else []
    for column in ["evidence_recall", *at_k, "mrr"]:
        if column in row and present(row[column]):
            scores.append((column, round(float(row[column]), 6), None, code))
    if "correctness" in row and present(row["correctness"]):
        scores.append(("answer_correctness", round(float(row["correctness"]), 6),
                       f"statement F1 {float(row['correctness_f1']):.3f} blended with BERTSim", 
                       AssessmentSource(*context.judge_source)))
    if "judge_score" in row and present(row["judge_score"]):
        rationale = row["judge_reason"] if "judge_reason" in row and present(row["judge_reason"]) \
            else "0-3-7: 7 same meaning, 3 partial or extra, 0 no match (the judge gave no reason)"
        scores.append(("judge_0_3_7", int(row["judge_score"]), rationale, AssessmentSource(*context.judge_source)))
    return scores


def traces_by_example(client, experiment_id: str, run_id: str) -> dict[str, str]:
    """Example id -> trace id of this run's traces in the store."""
    found, token = {}, None
    while True:
        page = client.search_traces(locations=[experiment_id], run_id=run_id, include_spans=False,
                                    max_results=500, page_token=token)
        found.update({t.info.tags[EXAMPLE_TAG]: t.info.trace_id for t in page if EXAMPLE_TAG in t.info.tags})
        token = page.token
        if not token:
            return found


def traced_examples(tracking_uri: str, experiment_id: str, run_id: str) -> set[str]:
    """The example ids whose trace of this run is in the store."""
    from mlflow import MlflowClient

    return set(traces_by_example(MlflowClient(tracking_uri), experiment_id, run_id))


def write_batch(client, context: TraceContext, by_id: pd.DataFrame, records: dict[str, dict],
                batch: Sequence[str]) -> None:
    """The batch's traces, then, once they are in the store, their assessments; a trace whose assessments could
    not be written is deleted, so it counts as missing and is written again whole."""
    import mlflow

    written = {i: _write_spans(context, by_id.loc[i], records[i]) for i in batch}
    mlflow.flush_trace_async_logging()
    for example_id, trace_id in written.items():
        try:
            _write_assessments(context, by_id.loc[example_id], records[example_id], trace_id)
        except Exception as err:  # its trace was dropped (a full queue), or the store refused one
            log.debug("assessments of %s not written (%s); its trace is written again", example_id, err)
            client.delete_traces(context.experiment_id, trace_ids=[trace_id])


def traces_key(result_key: str | None, context: TraceContext, ids: Sequence[str]) -> str | None:
    """What a run's traces show: the configuration's result (its cache key), the examples traced, the names and
    sources every trace carries, and this module's code; None without a result key (nothing to match)."""
    if result_key is None:
        return None
    shared = {name: value for name, value in vars(context).items()
              if name not in ("experiment_id", "run_id", "result_from_cache")}
    what = json.dumps([result_key, list(ids), shared, Path(__file__).read_text()], sort_keys=True, default=str)
    return "traces-" + hashlib.sha256(what.encode()).hexdigest()[:32]


def link_earlier(client, context: TraceContext, key: str, ids: Sequence[str]) -> TraceCount | None:
    """The traces of the latest other run in the experiment with the same ``traces_key`` and every trace in the
    store, linked to this run; None when there is no such run."""
    runs = client.search_runs([context.experiment_id], f"tags.`{KEY_TAG}` = '{key}'",
                              order_by=["attributes.start_time DESC"], max_results=5)
    for run in runs:
        if run.info.run_id == context.run_id:
            continue
        found = traces_by_example(client, context.experiment_id, run.info.run_id)
        if all(i in found for i in ids):
            trace_ids = [found[i] for i in ids]
            for start in range(0, len(trace_ids), LINKS_PER_CALL):
                client.link_traces_to_run(trace_ids[start:start + LINKS_PER_CALL], context.run_id)
            return TraceCount(len(ids), len(ids), run.info.run_id, key)
    return None


def write_traces(tracking_uri: str, context: TraceContext, rows: pd.DataFrame, records: dict[str, dict],
                 ids: Sequence[str], result_key: str | None = None) -> TraceCount:
    """One trace per example of ``ids``, checked in the store and written again where missing; never raises. A
    result read whole from the cache (``result_key`` given) links an earlier run's same traces when there is one."""
    from mlflow import MlflowClient

    ids, client = list(dict.fromkeys(ids)), MlflowClient(tracking_uri)
    pending, by_id = list(ids), rows.set_index("id", drop=False)
    key = traces_key(result_key, context, ids)
    if key is not None and context.result_from_cache:
        try:
            linked = link_earlier(client, context, key, ids)
            if linked is not None:
                return linked
        except Exception as err:  # the traces are written instead
            log.debug("%s: no earlier traces linked (%s: %s)", context.configuration, type(err).__name__, err)
    try:
        configure(tracking_uri, asynchronous=len(ids) > BATCH)
        for _ in range(ATTEMPTS):
            for start in range(0, len(pending), BATCH):
                write_batch(client, context, by_id, records, pending[start:start + BATCH])
            found = traced_examples(tracking_uri, context.experiment_id, context.run_id)
            pending = [i for i in ids if i not in found]
            if not pending:
                break
    except Exception as err:  # traces are a view of the results: a failure to write them never fails the run
        log.warning("%s: writing its traces failed (%s: %s)", context.configuration, type(err).__name__, err)
        try:
            pending = [i for i in ids if i not in traced_examples(tracking_uri, context.experiment_id, context.run_id)]
        except Exception:
            pass
    return TraceCount(len(ids), len(ids) - len(pending), key=key)
