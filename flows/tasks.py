"""Prefect tasks: the ``opi.pipeline`` stages at batch granularity, cached on their inputs + source.

Every task takes ``code`` (a hash of the ``opi`` sources) so that a library change invalidates results that
TASK_SOURCE alone would not notice. Results persist under ``paths.cache_dir``; re-runs and overlapping sweeps
(kNN alone and kNN inside A-Four) reuse them. Tasks receive the typed configs and built components
(``opi.schemas``, ``opi.components``); the cache keys them by their settings.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import TASK_SOURCE, CachePolicy, Inputs
from prefect.utilities.hashing import hash_objects

from flows.locks import FileLockManager
from flows.storage import AtomicLocalFileSystem
from opi import components, pipeline
from opi.classify import CrossFitted
from opi.embeddings import shared_embedder
from opi.relations import Triple
from opi.schemas import EmbeddingConfig, LLMConfig, MetricsConfig


@lru_cache(maxsize=2)
def code_version(with_flows: bool = False) -> str:
    """Hash of the ``opi`` sources (and of ``flows``, for results the flow code assembles)."""
    digest = hashlib.sha256()
    folders = [Path(pipeline.__file__).parent] + ([Path(__file__).parent] if with_flows else [])
    for path in sorted(p for folder in folders for p in folder.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class HashedList(list):
    """A big input many task calls receive (the examples, the article texts): its content hash is taken once, not
    at each call (hashing 2,400 examples for every task of 13 configurations cost seconds)."""

    content_hash: str


class HashedDict(dict):
    """The same for a dict (the chunked articles: 22 MB for 2,400 articles, 0.35 s to hash)."""

    content_hash: str


def hashed(value: list | dict, content_hash: str | None = None) -> HashedList | HashedDict:
    """``value`` marked with its content hash (``content_hash`` when the caller knows it from what it was made of)."""
    marked = HashedDict(value) if isinstance(value, dict) else HashedList(value)
    marked.content_hash = content_hash or _plain_hash(marked)
    return marked


def _plain_hash(value: HashedList | HashedDict) -> str:
    return hash_objects(dict(value) if isinstance(value, dict) else list(value), raise_on_failure=True)


def settings_key(value: Any) -> Any:
    """A config or component as plain data for a cache key: its class and its settings (resources left out)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"_target_": components.target_of(type(value)),
                **{f.name: settings_key(getattr(value, f.name)) for f in dataclasses.fields(value)
                   if f.name not in components.RESOURCES}}
    if isinstance(value, dict) and not isinstance(value, HashedDict):
        return {k: settings_key(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not isinstance(value, HashedList):
        return [settings_key(v) for v in value]
    return value


@dataclass
class ContentInputs(CachePolicy):
    """Prefect's INPUTS policy, with hashed() inputs keyed by their content hash and configs by their settings. A
    runner that rebuilds values on the way (Dask copies collections) loses the attribute: the hash is then taken
    again, so keys agree. Not a subclass of Inputs: a compound policy replaces every Inputs member by a plain one."""

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs):
        inputs = {name: ("content-hash", getattr(value, "content_hash", None) or _plain_hash(value))
                  if isinstance(value, (HashedList, HashedDict)) else settings_key(value)
                  for name, value in (inputs or {}).items()}
        return Inputs().compute_key(task_ctx, inputs, flow_parameters, **kwargs)


def cached(task_fn, cache_dir: str):
    """The task with its cache and result storage under ``cache_dir``. SERIALIZABLE with file locks: when two
    processes (parallel sweep jobs, two sweeps) need the same result, one computes it and the other waits and reads
    it, instead of both computing and racing to write it."""
    results, keys, locks = cache_layout(cache_dir)
    configured = task_fn.with_options(
        cache_policy=(ContentInputs() + TASK_SOURCE).configure(key_storage=keys, lock_manager=locks,
                                                               isolation_level="SERIALIZABLE"),
        persist_result=True, result_storage=Path(results.basepath))
    # Task() accepts an unsaved storage block only as a Path, which it turns into an unsaved LocalFileSystem at run
    # time; ours is that same block, writing atomically, set after the constructor's check
    configured.result_storage = results
    return configured


def cache_layout(cache_dir: str) -> tuple[AtomicLocalFileSystem, AtomicLocalFileSystem, FileLockManager]:
    """Where the cache keeps results, their keys and its locks: one layout for tasks and ``result_store``."""
    root = Path(cache_dir).resolve()
    return (AtomicLocalFileSystem(basepath=str(root / "results")), AtomicLocalFileSystem(basepath=str(root / "keys")),
            FileLockManager(root / "locks"))

def result_store(cache_dir: str):
    """The stage cache's store, for results kept without a task."""
    from prefect.results import ResultStore

    results, keys, locks = cache_layout(cache_dir)
    return ResultStore(result_storage=results, metadata_storage=keys, lock_manager=locks)


def read_kept(cache_dir: str, key: str) -> Any | None:
    """A result kept under ``key``, or None. Waits while another process is writing it."""
    store = result_store(cache_dir)
    if not store.exists(key):
        return None
    try:
        return store.read(key).result
    except Exception as err:  # a record left unreadable (a disk filled mid-write): computed again, then replaced
        logging.getLogger("opi").warning("cached result %s unreadable (%s: %s); computing it again", key,
                                         type(err).__name__, err)
        return None


def keep(cache_dir: str, key: str, value: Any) -> None:
    """Keep ``value`` under ``key``, written under its lock (same key, same inputs: any writer's value will do)."""
    store, holder = result_store(cache_dir), uuid.uuid4().hex
    store.acquire_lock(key, holder=holder)
    try:
        store.write(key=key, obj=value, holder=holder)
    finally:
        store.release_lock(key, holder=holder)


class StageCalls:
    """Calls stage tasks through the cache, counting hits, misses and seconds per stage."""

    def __init__(self, cache_dir: str, quote_inputs: bool = True):
        from prefect.utilities.annotations import quote

        self.cache_dir = cache_dir
        self.hits = self.misses = 0
        self.seconds: dict[str, float] = {}
        # quote(): our inputs are plain data, never futures, so Prefect need not walk them (seconds per warm grid).
        # Not on Dask, whose graphs read the annotation (a tuple) as a task.
        self.wrap = quote if quote_inputs else (lambda value: value)

    def call_many(self, stage: str, task_fn, *calls: tuple) -> list:
        """Submit the calls to the flow's task runner together, then collect their results in order."""
        started = time.perf_counter()
        futures = [cached(task_fn, self.cache_dir).submit(*map(self.wrap, args)) for args in calls]
        results = []
        for future in futures:
            future.wait()
            if future.state.name == "Cached":
                self.hits += 1
            else:
                self.misses += 1
            results.append(future.state.result())
        self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - started
        return results

    def call(self, stage: str, task_fn, *args):
        return self.call_many(stage, task_fn, args)[0]

    def counts(self) -> dict[str, float]:
        return {"cache_hits": self.hits, "cache_misses": self.misses,
                **{f"seconds_{stage}": s for stage, s in self.seconds.items()}}


def embedder_for(embedding: EmbeddingConfig):
    return shared_embedder(embedding.model, embedding.device, embedding.batch_size, embedding.backend)


@task(name="chunk-articles")
def chunk_articles(contexts: list[str], size: int, overlap: int, code: str):
    return pipeline.prepare_articles(contexts, size, overlap)


@task(name="rank")
def rank(retriever, examples: list, articles: dict, embedding: EmbeddingConfig, code: str):
    built = components.with_resources(retriever, embedder=embedder_for(embedding))
    return pipeline.rank_examples(built, examples, articles)


@task(name="answer")
def answer(llm: LLMConfig, questions: list[str], sentence_lists: list[list[str]], embedding: EmbeddingConfig,
           llm_cache: str, code: str) -> dict[str, Any]:
    """Answers and the LLM usage they cost (calls, cache hits, retries, tokens, cost)."""
    from flows.llm import client_for, progress_bar

    client = client_for(llm, llm_cache) if llm.endpoint else None
    reader = components.with_resources(llm.reader, embedder=embedder_for(embedding), client=client)
    if client is None:
        return {"answers": reader.answer(questions, sentence_lists), "usage": {}}
    bar, update = progress_bar(len(questions), f"answers ({llm.name})", client)
    with bar:
        answers = reader.answer(questions, sentence_lists, update)
    return {"answers": answers, "usage": client.usage.as_metrics("llm_answer")}


def _resources(embedding: EmbeddingConfig, seed: int, relation_set: str | None = None) -> dict[str, Any]:
    from opi.relations import load_relation_set

    return {"embedder": embedder_for(embedding), "embedding": embedding, "seed": seed,
            **({"relation_set": load_relation_set(relation_set)} if relation_set else {})}


@task(name="classify")
def classify(classifier, llm: LLMConfig, train_ids: list[str], train: list[Triple], train_labels: list[str],
             cross_fit: bool, apply_ids: list[str], apply: list[Triple], embedding: EmbeddingConfig,
             relation_set: str, seed: int, llm_cache: str, code: str, registered_uri: str | None = None
             ) -> dict[str, Any]:
    """Predicted relations of ``apply`` (``unknown`` where an LLM reply could not be parsed), usage and counts.

    A classifier that learns is fitted on ``train``: cross-fitted when ``train`` is the evaluated data's own pool
    (no example labelled by a model that saw it), else fitted once. ``registered_uri`` (``models:/name/version``)
    applies a model from the MLflow registry as it is: its training data should not overlap the evaluated examples.
    """
    resources = _resources(embedding, seed, relation_set)
    if registered_uri:
        import mlflow.sklearn

        model = components.with_resources(classifier, pipeline=mlflow.sklearn.load_model(registered_uri), **resources)
        return {"predicted": model.predict(apply), "usage": {}, "counts": {}}
    if getattr(classifier, "trains", False):
        model = fitted(classifier, train_ids, train, train_labels, cross_fit, resources)
        predicted = model.predict(apply_ids, apply) if cross_fit else model.predict(apply)
        return {"predicted": predicted, "usage": {}, "counts": {}}
    from flows.llm import client_for, progress_bar

    client = client_for(llm, llm_cache, model=getattr(classifier, "model", None))
    model = components.with_resources(classifier, client=client, **resources)
    bar, update = progress_bar(len(apply), f"relations ({classifier.name})", client)
    with bar:
        predicted = model.predict(apply, update)
    return {"predicted": predicted, "usage": client.usage.as_metrics("llm_classify"),
            "counts": {"parse_failures": float(getattr(model, "parse_failures", 0))}}


_FITTED: dict[str, Any] = {}  # fitted classifiers of this process: one fit serves every configuration of a sweep


def fitted(classifier, train_ids: list[str], train: list[Triple], train_labels: list[str], cross_fit: bool,
           resources: dict[str, Any]):
    """The classifier fitted on its training triples (cross-fitted, for the data's own pool), fitted once per
    process for the same settings and data."""
    key = hash_objects(settings_key(classifier), train_ids, getattr(train, "content_hash", None) or train,
                       train_labels, cross_fit, resources["seed"], settings_key(resources["embedding"]),
                       raise_on_failure=True)
    if key not in _FITTED:
        def fresh():
            return components.with_resources(classifier, **resources)

        while len(_FITTED) >= 2:  # a sweep's (a cross-fitted and a plainly fitted one at most), not every one seen
            _FITTED.pop(next(iter(_FITTED)))
        _FITTED[key] = (CrossFitted(fresh, train_ids, train, train_labels, getattr(classifier, "folds", 5))
                        if cross_fit else fresh().fit(train, train_labels))
    return _FITTED[key]


@task(name="classifier-accuracy")
def classifier_accuracy(classifier, train_ids: list[str], train: list[Triple], train_labels: list[str],
                        embedding: EmbeddingConfig, seed: int, code: str) -> float:
    """Cross-validated accuracy of the classifier on its labelled training triples."""
    model = fitted(classifier, train_ids, train, train_labels, True, _resources(embedding, seed))
    predicted = model.predict(train_ids, train)
    return float(sum(p == g for p, g in zip(predicted, train_labels)) / len(train_labels))


@task(name="answer-similarity")
def answer_similarity(gold: list[str], generated: list[str], embedding: EmbeddingConfig, code: str) -> list[float]:
    from opi.metrics.opi import cosine_rows

    embedder = embedder_for(embedding)
    return cosine_rows(embedder.encode(gold, normalize=False), embedder.encode(generated, normalize=False)).tolist()


@task(name="answer-quality")
def answer_quality(metrics: MetricsConfig, llm: LLMConfig, questions: list[str], truths: list[str],
                   answers: list[str], similarities: list[float], llm_cache: str, code: str) -> dict[str, Any]:
    """LLM-scored answer metrics per example (None where a reply could not be parsed) and their usage."""
    from flows.llm import client_for
    from opi.metrics.correctness import AnswerCorrectness
    from opi.metrics.extrinsic import LLMJudge

    client = client_for(llm, llm_cache)
    columns: dict[str, list] = {}
    counts: dict[str, float] = {}
    if metrics.correctness:
        scorer = AnswerCorrectness(client, metrics.correctness_weights, metrics.similarity_threshold,
                                   metrics.parse_retries)
        results = [scorer.score(q, a, t, s) for q, a, t, s in zip(questions, answers, truths, similarities)]
        columns["correctness"] = [r.score for r in results]
        columns["correctness_f1"] = [r.f1 for r in results]
        counts["correctness_failures"] = float(sum(r.score is None for r in results))
    if metrics.judge:
        judge = LLMJudge(client, metrics.parse_retries)
        columns["judge_score"] = judge.score(questions, truths, answers)
        counts["judge_failures"] = float(judge.parse_failures)
    return {"columns": columns, "counts": counts, "usage": client.usage.as_metrics("llm_metrics")}


@task(name="sweep-report")
def sweep_report(configurations: list, relations: list[str], settings, code: str):
    """The sweep report's tables and tests (its permutation tests are most of a warm sweep's time otherwise)."""
    from opi.report import build_report

    return build_report(configurations, relations, settings)
