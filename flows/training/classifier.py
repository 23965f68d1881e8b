"""``opi-train-classifier``'s work: the paper's RAG-QA-1300 recipe for the logical-relation classifier.

Balanced split -> train (scikit-learn locally, or OpenAI fine-tuning) -> register -> evaluate on the test split,
as one Prefect flow tracked in one MLflow run (experiment ``<tracking.experiment>-classifier``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import mlflow
import mlflow.sklearn
import pandas as pd
from prefect import flow
from sklearn.model_selection import StratifiedKFold, cross_val_score

from flows.base.errors import CommandError
from flows.orchestration.clients import client_for
from flows.orchestration.server import run_flow
from flows.run.data import load_data
from flows.run.identity import effective_settings, own_embedding
from flows.tracking.runs import flatten
from flows.tracking.store import open_experiment
from opi.classify import (LLMRelationClassifier, LocalRelationClassifier, endpoint_settings, relation_pipeline,
                          triples_frame)
from opi.embeddings import embedder_for, use_store
from opi.interrupt import exiting
from opi.components import with_resources
from opi.data import Example, balanced_split
from opi.llm import finetune
from opi.metrics.classification import classification_scores, confusion_figure
from opi.relations import RelationSet, Triple
from opi.schemas import CLASSIFIER_EXPERIMENT_SUFFIX, OPIConfig

log = logging.getLogger("opi")
# our one custom pipeline step, for skops (models saved before it moved name it opi.classify.*)
TRUSTED_TYPES = ["opi.relation_features.SentenceEmbeddingFeatures", "opi.classify.SentenceEmbeddingFeatures"]


@dataclass(frozen=True)
class Split:
    """The balanced train/test split and how many relations had fewer examples than asked."""

    relation_set: RelationSet
    train: list[Example]
    test: list[Example]
    short: int

    def triples(self, examples: list[Example]) -> list[Triple]:
        return [Triple(e.context, e.question, e.answer) for e in examples]

    def labels(self, examples: list[Example]) -> list[str]:
        return [e.relation for e in examples]


def balanced(cfg: OPIConfig) -> Split:
    data = load_data(cfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train, test = balanced_split(data.pool, cfg.train.per_relation, cfg.train.test_fraction, cfg.seed)
    for warning in caught:
        log.warning("%s", warning.message)
    return Split(data.relation_set, train, test, len(caught))


def split_problem(cfg: OPIConfig, split: Split) -> str | None:
    """Why the split cannot train or test what the command asks (None: it can), said before any run opens."""
    t, counts = cfg.train, Counter(split.labels(split.train))
    if t.backend == "local" and len(counts) < 2:
        return (f"the training split holds {len(counts)} relation{'' if len(counts) == 1 else 's'} "
                f"({', '.join(counts) or 'no examples'}): a classifier is trained on at least 2; check the data's "
                f"relation labels")
    if t.backend == "local" and max(counts.values()) < t.cv_folds:
        return (f"train.cv_folds={t.cv_folds} needs a relation with at least {t.cv_folds} training examples, and the "
                f"most any has is {max(counts.values())} (train.per_relation={t.per_relation}, "
                f"train.test_fraction={t.test_fraction:g}): raise train.per_relation, or lower train.cv_folds")
    if t.evaluate and not split.test:
        return (f"the test split is empty: train.per_relation={t.per_relation} x train.test_fraction="
                f"{t.test_fraction:g} rounds to no test example of any relation: raise either, or set "
                f"train.evaluate=false")
    return None


def fit_local(cfg: OPIConfig, split: Split) -> tuple[Any, dict[str, float]]:
    """Cross-validate each family on train, fit the best on all of train, log and register it."""
    # the configured classifier's settings where it is the local one, else the local one's defaults
    local = cfg.classifier if isinstance(cfg.classifier, LocalRelationClassifier) else LocalRelationClassifier()
    t, emb, C, words = cfg.train, own_embedding(cfg, cfg.classifier), local.C, local.question_words
    frame, labels = triples_frame(split.triples(split.train)), split.labels(split.train)
    folds = StratifiedKFold(n_splits=t.cv_folds, shuffle=True, random_state=cfg.seed)
    scores = {}
    for family in t.families:
        pipeline = relation_pipeline(family, C, cfg.seed, emb.model, emb.device, words, endpoint_settings(emb))
        scores[family] = float(cross_val_score(pipeline, frame, labels, cv=folds).mean())
        log.info("cross-validated accuracy on train, %s: %.4f", family, scores[family])
    best = max(scores, key=scores.get)
    pipeline = relation_pipeline(best, C, cfg.seed, emb.model, emb.device, words, endpoint_settings(emb)
                                 ).fit(frame, labels)
    info = mlflow.sklearn.log_model(pipeline, name="relation-classifier", registered_model_name=t.register_name,
                                    input_example=frame.head(2), skops_trusted_types=TRUSTED_TYPES)
    version = info.registered_model_version
    mlflow.MlflowClient().set_registered_model_alias(t.register_name, t.alias, version)
    log.info("registered %s version %s as @%s: classifier.registered=models:/%s@%s", t.register_name, version,
             t.alias, t.register_name, t.alias)
    mlflow.set_tags({"opi.classifier_family": best, "opi.registered_version": str(version)})
    return pipeline, {f"cv_accuracy.{family}": score for family, score in scores.items()}


def fine_tune(cfg: OPIConfig, split: Split) -> str:
    """Write and validate the training file, find or create the job, wait for it; returns the model id."""
    t = cfg.train
    folder = Path(cfg.paths.cache_dir).resolve() / "finetune"
    folder.mkdir(parents=True, exist_ok=True)
    lines = finetune.training_lines(split.triples(split.train), split.labels(split.train), split.relation_set)
    with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".part", delete=False, encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    report = finetune.validate_training_file(handle.name, split.relation_set)
    path = folder / f"train-{report.sha256[:16]}.jsonl"
    Path(handle.name).replace(path)  # complete files only: a crash leaves a .part, never a half training file
    mlflow.log_metrics({"finetune_examples": report.examples, "finetune_tokens_estimate": report.tokens,
                        "finetune_max_example_tokens": report.max_example_tokens})
    mlflow.log_artifact(str(path), "finetune")
    client = client_for(cfg.llm, cfg.paths.llm_cache).openai()
    job, created = finetune.find_or_create_job(client, path, report, t.base_model, t.suffix, cfg.seed, t.n_epochs,
                                               log.info)
    mlflow.set_tags({"opi.finetune_job": job.id, "opi.finetune_created": str(created)})
    job = finetune.wait_for_job(client, job.id, t.first_poll_seconds, t.max_poll_seconds, t.timeout_seconds, log.info)
    if job.status != "succeeded":
        raise RuntimeError(f"fine-tuning job {job.id} ended {job.status}: {getattr(job, 'error', None)}")
    mlflow.set_tag("opi.fine_tuned_model", job.fine_tuned_model)
    mlflow.log_param("fine_tuned_model", job.fine_tuned_model)
    print(f"\nfine-tuned model ready; evaluate with:\n  opi-eval llm={cfg.llm.name} classifier=finetuned "
          f"classifier.model={job.fine_tuned_model}\n")
    return job.fine_tuned_model


def predict(cfg: OPIConfig, split: Split, fitted=None, model_id: str | None = None
            ) -> tuple[list[str], dict[str, float]]:
    """Test-split predictions of the configured (or just trained) classifier, and the LLM usage they cost."""
    classifier, test = cfg.classifier, split.triples(split.test)
    resources = {"embedder": embedder_for(own_embedding(cfg, cfg.classifier)), "embedding": own_embedding(cfg, cfg.classifier),
                 "seed": cfg.seed,
                 "relation_set": split.relation_set}
    if fitted is not None or classifier.registered:
        fitted = fitted if fitted is not None else mlflow.sklearn.load_model(classifier.registered)
        return LocalRelationClassifier(pipeline=fitted).predict(test), {}
    if classifier.trains:
        trained = with_resources(classifier, **resources).fit(split.triples(split.train), split.labels(split.train))
        return trained.predict(test), {}
    if model_id:  # just fine-tuned: ask it in its training format
        classifier = LLMRelationClassifier(model=model_id, finetuned=True)
    client = client_for(cfg.llm, cfg.paths.llm_cache, model=classifier.model)
    model = with_resources(classifier, client=client, **resources)
    predicted = model.predict(test)
    return predicted, {**client.usage.as_metrics("llm_classify"),
                       "parse_failures": float(model.parse_failures)}


def run_name(cfg: OPIConfig, split: Split) -> str:
    classifier, backend = cfg.classifier, cfg.train.backend
    name = {"local": "local-clf (trained)", "openai": f"fine-tune {cfg.train.base_model}"}.get(
        backend, classifier.name if classifier.trains else f"{classifier.name} ({cfg.llm.name})")
    return f"{name} | {len(split.train)}/{len(split.test)} split"


def log_test_scores(split: Split, predicted: list[str], extra: dict[str, float], title: str) -> dict[str, float]:
    """Accuracy, macro-F1, per-relation precision and recall, the confusion matrix and the test predictions."""
    labels = split.relation_set.labels
    metrics, table, matrix = classification_scores(split.labels(split.test), predicted, labels)
    metrics.update(extra)
    metrics.update({f"precision.{r}": p for r, p in zip(table["relation"], table["precision"])})
    metrics.update({f"recall.{r}": p for r, p in zip(table["relation"], table["recall"])})
    mlflow.log_metrics(metrics)
    columns = labels + sorted(set(predicted) - set(labels))
    mlflow.log_figure(confusion_figure(matrix, labels, columns, f"{title}: accuracy {metrics['accuracy']:.3f} on "
                                                                f"{len(split.test)} test examples"),
                      "confusion_matrix.png")
    mlflow.log_table(table, "per_relation.json")
    with tempfile.TemporaryDirectory() as folder:
        table.to_csv(Path(folder) / "per_relation.csv", index=False)
        pd.DataFrame({"id": [e.id for e in split.test], "relation": split.labels(split.test),
                      "predicted": predicted}).to_csv(Path(folder) / "test_predictions.csv", index=False)
        mlflow.log_artifacts(folder)
    return metrics


def train_and_evaluate(cfg: OPIConfig) -> dict[str, float]:
    _, experiment_id = open_experiment(cfg.tracking, cfg.tracking.experiment + CLASSIFIER_EXPERIMENT_SUFFIX)
    mlflow.set_tracking_uri(cfg.tracking.tracking_uri)  # this command's own process: the fluent API logs the model
    split = balanced(cfg)
    problem = split_problem(cfg, split)
    if problem:
        raise CommandError(problem)
    name = run_name(cfg, split)
    with mlflow.start_run(experiment_id=experiment_id, run_name=name), killed_when_stopped():
        settings = {**effective_settings(cfg), "train": dataclasses.asdict(cfg.train)}
        mlflow.log_params({k: str(v)[:500] for k, v in flatten(settings).items()})
        mlflow.log_metrics({"n_train": len(split.train), "n_test": len(split.test), "relations_short": split.short})
        fitted, model_id, extra = None, None, {}
        if cfg.train.backend == "local":
            fitted, extra = fit_local(cfg, split)
        elif cfg.train.backend == "openai":
            model_id = fine_tune(cfg, split)
        if not cfg.train.evaluate:
            return extra
        predicted, usage = predict(cfg, split, fitted, model_id)
        metrics = log_test_scores(split, predicted, {**extra, **usage}, name.split(" | ")[0])
        log.info("%s: test accuracy %.4f, macro-F1 %.4f on %d examples (chance %.4f; the paper: fine-tuned GPT-4o "
                 "0.7577, base GPT-4o 0.4923)", name.split(" | ")[0], metrics["accuracy"], metrics["macro_f1"],
                 len(split.test), metrics["chance_accuracy"])
        return metrics


@contextlib.contextmanager
def killed_when_stopped() -> Iterator[None]:
    """The training run ends KILLED when the process was stopped (Ctrl-C, a signal), as a sweep's runs do; MLflow's
    own context would mark it FAILED."""
    try:
        yield
    except BaseException:
        if exiting():
            mlflow.end_run("KILLED")
        raise


def train_classifier(config: OPIConfig) -> dict[str, float]:
    """The work as one Prefect flow run."""
    @flow(name="opi-train-classifier", validate_parameters=False)
    def train() -> dict[str, float]:
        with use_store(config.paths.embedding_store):
            return train_and_evaluate(config)

    return run_flow(train)
