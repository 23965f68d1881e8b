"""Prefect tasks: the ``opi.pipeline`` stages at batch granularity, cached on their inputs + source.

Every task takes ``code`` (a hash of the ``opi`` sources) so that a library change invalidates results that
TASK_SOURCE alone would not notice. Results persist under ``paths.cache_dir``; re-runs and overlapping sweeps
(kNN alone and kNN inside A-Four) reuse them.
"""
from __future__ import annotations

import fcntl
import hashlib
import logging
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import TASK_SOURCE, CachePolicy, Inputs
from prefect.locking.filesystem import FileSystemLockManager
from prefect.utilities.hashing import hash_objects

from flows.owners import gone, this_process
from opi import pipeline
from opi.classify import LocalRelationClassifier, Triple, cross_fit_predict, cross_validated_accuracy
from opi.embeddings import shared_embedder
from opi.llm.reader import ExtractiveReader


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


def hashed(value: list | dict) -> HashedList | HashedDict:
    marked = HashedDict(value) if isinstance(value, dict) else HashedList(value)
    marked.content_hash = _plain_hash(marked)
    return marked


def _plain_hash(value: HashedList | HashedDict) -> str:
    return hash_objects(dict(value) if isinstance(value, dict) else list(value), raise_on_failure=True)


@dataclass
class ContentInputs(CachePolicy):
    """Prefect's INPUTS policy, with hashed() inputs keyed by their content hash. A runner that rebuilds the value
    on the way (Dask copies collections) loses the attribute: the hash is then taken again, so keys agree.
    Not a subclass of Inputs: a compound policy replaces every Inputs member by a plain one."""

    def compute_key(self, task_ctx, inputs, flow_parameters, **kwargs):
        inputs = {name: ("content-hash", getattr(value, "content_hash", None) or _plain_hash(value))
                  if isinstance(value, (HashedList, HashedDict)) else value for name, value in (inputs or {}).items()}
        return Inputs().compute_key(task_ctx, inputs, flow_parameters, **kwargs)


class ProcessLockManager(FileSystemLockManager):
    """Prefect's file locks, which never expire, plus the owner's host and pid beside each lock: a lock whose owner
    process is gone (killed mid-task) is stale and broken, so a re-run resumes instead of waiting forever."""

    def _owner_path(self, key: str) -> Path:
        return self._lock_path_for_key(key).with_suffix(".owner")

    def acquire_lock(self, key, holder, acquire_timeout=None, hold_timeout=None) -> bool:
        acquired = super().acquire_lock(key, holder, acquire_timeout, hold_timeout)
        if acquired:
            self._owner_path(key).write_text(" ".join(this_process()))
        return acquired

    def release_lock(self, key, holder) -> None:
        if self.is_lock_holder(key, holder):  # owner first: once the lock is gone another process may take it
            self._owner_path(key).unlink(missing_ok=True)
        super().release_lock(key, holder)

    def is_locked(self, key, use_cache=False) -> bool:
        locked = super().is_locked(key, use_cache)
        if not (locked and self._owner_gone(key)):
            return locked
        # several waiters may find the same dead owner: one at a time breaks it, each re-checking under the guard
        with open(self._lock_path_for_key(key).with_suffix(".break"), "w") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)
            if super().is_locked(key) and self._owner_gone(key):
                self._owner_path(key).unlink(missing_ok=True)
                self._lock_path_for_key(key).unlink(missing_ok=True)
                self._locks.pop(key, None)
        return super().is_locked(key)

    def _owner_gone(self, key: str) -> bool:
        try:
            host, pid = self._owner_path(key).read_text().split()
        except (OSError, ValueError):
            return False  # no owner written yet: the lock is being taken right now
        return gone(host, pid)


def cached(task_fn, cache_dir: str):
    """The task with its cache and result storage under ``cache_dir``. SERIALIZABLE with file locks: when two
    processes (parallel sweep jobs, two sweeps) need the same result, one computes it and the other waits and reads
    it, instead of both computing and racing to write it."""
    results, keys, locks = cache_layout(cache_dir)
    return task_fn.with_options(
        cache_policy=(ContentInputs() + TASK_SOURCE).configure(key_storage=keys, lock_manager=locks,
                                                               isolation_level="SERIALIZABLE"),
        persist_result=True, result_storage=results)


def cache_layout(cache_dir: str) -> tuple[Path, Path, ProcessLockManager]:
    """Where the cache keeps results, their keys and its locks: one layout for tasks and ``result_store``."""
    root = Path(cache_dir).resolve()
    return root / "results", root / "keys", ProcessLockManager(lock_files_directory=root / "locks")


def result_store(cache_dir: str):
    """The stage cache's store, for results kept without a task."""
    from prefect.filesystems import LocalFileSystem
    from prefect.results import ResultStore

    results, keys, locks = cache_layout(cache_dir)
    return ResultStore(result_storage=LocalFileSystem(basepath=str(results)),
                       metadata_storage=LocalFileSystem(basepath=str(keys)), lock_manager=locks)


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


def embedder_for(embedding: dict[str, Any]):
    return shared_embedder(embedding["model"], embedding["device"], embedding["batch_size"], embedding["backend"])


@task(name="chunk-articles")
def chunk_articles(contexts: list[str], size: int, overlap: int, code: str):
    return pipeline.prepare_articles(contexts, size, overlap)


@task(name="rank")
def rank(spec: dict[str, Any], examples: list, articles: dict, embedding: dict[str, Any], code: str):
    retriever = pipeline.build_retriever(spec, embedder_for(embedding))
    return pipeline.rank_examples(retriever, examples, articles)


@task(name="answer")
def answer(llm: dict[str, Any], questions: list[str], sentence_lists: list[list[str]], embedding: dict[str, Any],
           llm_cache: str, code: str) -> dict[str, Any]:
    """Answers and the LLM usage they cost (calls, cache hits, retries, tokens, cost)."""
    if llm["kind"] == "extractive":
        reader = ExtractiveReader(embedder_for(embedding), n_sentences=llm["n_sentences"])
        return {"answers": reader.answer(questions, sentence_lists), "usage": {}}
    from flows.llm import client_for, progress_bar
    from opi.llm.reader import LLMReader

    client = client_for(llm, llm_cache)
    bar, update = progress_bar(len(questions), f"answers ({llm['name']})", client)
    with bar:
        answers = LLMReader(client).answer(questions, sentence_lists, update)
    return {"answers": answers, "usage": client.usage.as_metrics("llm_answer")}


def _make_classifier(classifier: dict[str, Any], embedding: dict[str, Any], seed: int):
    embedder_for(embedding)  # the pipeline's features use this same shared embedder
    return lambda: LocalRelationClassifier(classifier["family"], classifier["C"], seed, embedding["model"],
                                           embedding["device"])


@task(name="classify")
def classify(classifier: dict[str, Any], llm: dict[str, Any], pool_ids: list[str], pool: list[Triple],
             labels: list[str], apply_ids: list[str], apply: list[Triple], embedding: dict[str, Any],
             relation_set: str, seed: int, llm_cache: str, code: str, registered_uri: str | None = None
             ) -> dict[str, Any]:
    """Predicted relations (``unknown`` where an LLM reply could not be parsed) and what it cost.

    ``registered_uri`` (``models:/name/version``) applies a model from the MLflow registry as it is: no
    cross-fitting, so its training data should not overlap the evaluated examples.
    """
    if registered_uri:
        import mlflow.sklearn

        pipeline = mlflow.sklearn.load_model(registered_uri)
        return {"predicted": LocalRelationClassifier(pipeline=pipeline).predict(apply), "usage": {}}
    if classifier["kind"] == "local":
        return {"predicted": cross_fit_predict(_make_classifier(classifier, embedding, seed), pool_ids, pool, labels,
                                               apply_ids, apply, classifier["folds"]), "usage": {}}
    from flows.llm import client_for, progress_bar
    from opi.classify import LLMRelationClassifier
    from opi.relations import load_relation_set

    client = client_for(llm, llm_cache, model=classifier.get("model"))
    model = LLMRelationClassifier(client, load_relation_set(relation_set), classifier["parse_retries"],
                                  finetuned=classifier["kind"] == "finetuned")
    bar, update = progress_bar(len(apply), f"relations ({classifier['name']})", client)
    with bar:
        predicted = model.predict(apply, update)
    return {"predicted": predicted,
            "usage": {**client.usage.as_metrics("llm_classify"), "parse_failures": float(model.parse_failures)}}


@task(name="classifier-accuracy")
def classifier_accuracy(classifier: dict[str, Any], pool_ids: list[str], pool: list[Triple], labels: list[str],
                        embedding: dict[str, Any], seed: int, code: str) -> float:
    return cross_validated_accuracy(_make_classifier(classifier, embedding, seed), pool_ids, pool, labels,
                                    classifier["folds"])


@task(name="answer-similarity")
def answer_similarity(gold: list[str], generated: list[str], embedding: dict[str, Any], code: str) -> list[float]:
    from opi.metrics.opi import cosine_rows

    embedder = embedder_for(embedding)
    return cosine_rows(embedder.encode(gold, normalize=False), embedder.encode(generated, normalize=False)).tolist()


@task(name="answer-quality")
def answer_quality(metrics: dict[str, Any], llm: dict[str, Any], questions: list[str], truths: list[str],
                   answers: list[str], similarities: list[float], llm_cache: str, code: str) -> dict[str, Any]:
    """LLM-scored answer metrics per example (None where a reply could not be parsed) and their usage."""
    from flows.llm import client_for
    from opi.metrics.correctness import AnswerCorrectness
    from opi.metrics.extrinsic import LLMJudge

    client = client_for(llm, llm_cache)
    columns: dict[str, list] = {}
    counts: dict[str, float] = {}
    if metrics["correctness"]:
        scorer = AnswerCorrectness(client, metrics["correctness_weights"], metrics["similarity_threshold"],
                                   metrics["parse_retries"])
        results = [scorer.score(q, a, t, s) for q, a, t, s in zip(questions, answers, truths, similarities)]
        columns["correctness"] = [r.score for r in results]
        columns["correctness_f1"] = [r.f1 for r in results]
        counts["correctness_failures"] = float(sum(r.score is None for r in results))
    if metrics["judge"]:
        judge = LLMJudge(client, metrics["parse_retries"])
        columns["judge_score"] = judge.score(questions, truths, answers)
        counts["judge_failures"] = float(judge.parse_failures)
    return {"columns": columns, "counts": counts, "usage": client.usage.as_metrics("llm_metrics")}


@task(name="sweep-report")
def sweep_report(runs: dict, relations: list[str], settings, code: str):
    """The sweep report's tables and tests (its permutation tests are most of a warm sweep's time otherwise)."""
    from opi.report import build_report

    return build_report(dict(runs), relations, settings)
