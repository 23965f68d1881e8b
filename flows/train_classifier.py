"""``opi-train-classifier``: the paper's RAG-QA-1300 recipe for the logical-relation classifier.

Balanced split -> train (scikit-learn locally, or OpenAI fine-tuning) -> register -> evaluate on the test split,
as one Prefect flow tracked in one MLflow run (experiment ``<tracking.experiment>-classifier``).
"""
from __future__ import annotations

import logging
import tempfile
import warnings
from pathlib import Path
from typing import Any

import flows  # noqa: F401  (environment defaults before prefect/mlflow import)
import hydra
from omegaconf import DictConfig

from flows.config import CONF_DIR, register_configs
from flows.entry import checked, hydra_command, run_or_explain
from flows.evaluate import load_data
from flows.prefect_runtime import run_flow, start_prefect_server_early
from opi.schemas import OPIConfig

log = logging.getLogger("opi")
register_configs()
# our one custom pipeline step, for skops (models saved before it moved name it opi.classify.*)
TRUSTED_TYPES = ["opi.relation_features.SentenceEmbeddingFeatures", "opi.classify.SentenceEmbeddingFeatures"]


def balanced(cfg: OPIConfig):
    from opi.data import balanced_split
    from opi.relations import Triple

    data = load_data(cfg)
    relation_set, pool = data.relation_set, data.pool
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train, test = balanced_split(pool, cfg.train.per_relation, cfg.train.test_fraction, cfg.seed)
    for warning in caught:
        log.warning("%s", warning.message)
    triples = lambda examples: [Triple(e.context, e.question, e.answer) for e in examples]  # noqa: E731
    return relation_set, train, test, triples(train), triples(test), len(caught)


def fit_local(cfg: OPIConfig, train_triples, train_labels, mlflow) -> tuple[Any, dict[str, float]]:
    """Cross-validate each family on train, fit the best on all of train, log and register it."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    from opi.classify import relation_pipeline, triples_frame

    t, emb, C = cfg.train, cfg.embedding, getattr(cfg.classifier, "C", 30.0)
    words = getattr(cfg.classifier, "question_words", False)
    frame = triples_frame(train_triples)
    folds = StratifiedKFold(n_splits=t.cv_folds, shuffle=True, random_state=cfg.seed)
    scores = {}
    for family in t.families:
        pipeline = relation_pipeline(family, C, cfg.seed, emb.model, emb.device, words)
        scores[family] = float(cross_val_score(pipeline, frame, train_labels, cv=folds).mean())
        log.info("cross-validated accuracy on train, %s: %.4f", family, scores[family])
    best = max(scores, key=scores.get)
    pipeline = relation_pipeline(best, C, cfg.seed, emb.model, emb.device, words)
    pipeline.fit(frame, train_labels)
    info = mlflow.sklearn.log_model(pipeline, name="relation-classifier", registered_model_name=t.register_name,
                                    input_example=frame.head(2), skops_trusted_types=TRUSTED_TYPES)
    version = info.registered_model_version
    mlflow.MlflowClient().set_registered_model_alias(t.register_name, t.alias, version)
    log.info("registered %s version %s as @%s: classifier.registered=models:/%s@%s", t.register_name, version,
             t.alias, t.register_name, t.alias)
    mlflow.set_tags({"opi.classifier_family": best, "opi.registered_version": str(version)})
    return pipeline, {f"cv_accuracy.{family}": score for family, score in scores.items()}


def fine_tune(cfg: OPIConfig, relation_set, train_triples, train_labels, mlflow) -> str:
    """Write and validate the training file, find or create the job, wait for it; returns the model id."""
    from flows.llm import client_for
    from opi.llm import finetune

    t = cfg.train
    folder = Path(cfg.paths.cache_dir).resolve() / "finetune"
    folder.mkdir(parents=True, exist_ok=True)
    lines = finetune.training_lines(train_triples, train_labels, relation_set)
    with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".part", delete=False, encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    report = finetune.validate_training_file(handle.name, relation_set)
    path = folder / f"train-{report.sha256[:16]}.jsonl"
    Path(handle.name).replace(path)  # complete files only: a crash leaves a .part, never a half training file
    mlflow.log_metrics({"finetune_examples": report.examples, "finetune_tokens_estimate": report.tokens,
                        "finetune_max_example_tokens": report.max_example_tokens})
    mlflow.log_artifact(str(path), "finetune")
    client = client_for(cfg.llm, cfg.paths.llm_cache)._openai()
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


def predict(cfg: OPIConfig, relation_set, train_triples, train_labels, test_triples, fitted=None, model_id=None):
    """Test-split predictions of the configured (or just trained) classifier."""
    from flows.tasks import embedder_for
    from opi.components import with_resources

    classifier = cfg.classifier
    resources = {"embedder": embedder_for(cfg.embedding), "embedding": cfg.embedding, "seed": cfg.seed,
                 "relation_set": relation_set}
    if fitted is not None or getattr(classifier, "registered", None):
        if fitted is None:
            import mlflow.sklearn

            fitted = mlflow.sklearn.load_model(classifier.registered)
        from opi.classify import LocalRelationClassifier

        return LocalRelationClassifier(pipeline=fitted).predict(test_triples), {}
    if getattr(classifier, "trains", False):
        return with_resources(classifier, **resources).fit(train_triples, train_labels).predict(test_triples), {}
    from flows.llm import client_for

    if model_id:  # just fine-tuned: ask it in its training format
        from opi.classify import LLMRelationClassifier

        classifier = LLMRelationClassifier(model=model_id, finetuned=True)
    client = client_for(cfg.llm, cfg.paths.llm_cache, model=getattr(classifier, "model", None))
    model = with_resources(classifier, client=client, **resources)
    predicted = model.predict(test_triples)
    return predicted, {**client.usage.as_metrics("llm_classify"),
                       "parse_failures": float(getattr(model, "parse_failures", 0))}


def train_and_evaluate(cfg: OPIConfig) -> dict[str, float]:
    import dataclasses

    from flows.config import effective_settings
    from flows.tracking import _mlflow, flatten
    from opi.metrics.classification import classification_scores, confusion_figure

    mlflow = _mlflow(dataclasses.replace(cfg.tracking, experiment=cfg.tracking.experiment + "-classifier"))
    relation_set, train, test, train_triples, test_triples, short = balanced(cfg)
    train_labels, test_labels = [e.relation for e in train], [e.relation for e in test]
    backend = cfg.train.backend
    classifier = cfg.classifier
    name = {"local": "local-clf (trained)", "openai": f"fine-tune {cfg.train.base_model}"}.get(
        backend, classifier.name if getattr(classifier, "trains", False) else f"{classifier.name} ({cfg.llm.name})")
    with mlflow.start_run(run_name=f"{name} | {len(train)}/{len(test)} split"):
        settings = {**effective_settings(cfg), "train": dataclasses.asdict(cfg.train)}
        mlflow.log_params({k: str(v)[:500] for k, v in flatten(settings).items()})
        mlflow.log_metrics({"n_train": len(train), "n_test": len(test), "relations_short": short})
        fitted, model_id, extra = None, None, {}
        if backend == "local":
            fitted, extra = fit_local(cfg, train_triples, train_labels, mlflow)
        elif backend == "openai":
            model_id = fine_tune(cfg, relation_set, train_triples, train_labels, mlflow)
        if not cfg.train.evaluate:
            return extra
        predicted, usage = predict(cfg, relation_set, train_triples, train_labels, test_triples, fitted, model_id)
        metrics, table, matrix = classification_scores(test_labels, predicted, relation_set.labels)
        metrics.update({**extra, **usage})
        metrics.update({f"precision.{r}": p for r, p in zip(table["relation"], table["precision"])})
        metrics.update({f"recall.{r}": p for r, p in zip(table["relation"], table["recall"])})
        mlflow.log_metrics(metrics)
        columns = relation_set.labels + sorted(set(predicted) - set(relation_set.labels))
        mlflow.log_figure(confusion_figure(matrix, relation_set.labels, columns,
                                           f"{name}: accuracy {metrics['accuracy']:.3f} on {len(test)} test examples"),
                          "confusion_matrix.png")
        mlflow.log_table(table, "per_relation.json")
        with tempfile.TemporaryDirectory() as folder:
            import pandas as pd

            table.to_csv(Path(folder) / "per_relation.csv", index=False)
            pd.DataFrame({"id": [e.id for e in test], "relation": test_labels, "predicted": predicted}).to_csv(
                Path(folder) / "test_predictions.csv", index=False)
            mlflow.log_artifacts(folder)
        log.info("%s: test accuracy %.4f, macro-F1 %.4f on %d examples (chance %.4f; the paper: fine-tuned GPT-4o "
                 "0.7577, base GPT-4o 0.4923)", name, metrics["accuracy"], metrics["macro_f1"], len(test),
                 metrics["chance_accuracy"])
        return metrics


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="train_classifier")
def train_job(cfg: DictConfig) -> float:
    config = checked(cfg)
    from prefect import flow

    @flow(name="opi-train-classifier", validate_parameters=False)
    def train_classifier(config: OPIConfig) -> dict[str, float]:
        return train_and_evaluate(config)

    metrics = run_or_explain(run_flow, train_classifier, config)
    return float(metrics.get("accuracy", 0.0))


def main() -> None:
    flows.command_start()
    run_or_explain(start_prefect_server_early)
    hydra_command(train_job)


if __name__ == "__main__":
    main()
