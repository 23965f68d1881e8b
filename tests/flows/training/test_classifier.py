"""``opi-train-classifier``'s work (``flows.training.classifier``): the balanced split, the run's name, the test
split's scores as logged, the fine-tuning file written whole under its content's name, and which classifier labels
the test split. The full local and OpenAI paths run from the command line in ``tests/flows/cli``."""
import hashlib
import json
import logging
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pandas as pd
import pytest

from flows.training import classifier
from flows.training.classifier import (Split, balanced, fine_tune, log_test_scores, predict, run_name,
                                       split_problem)
from opi.classify import LLMRelationClassifier
from opi.data import Example
from opi.llm import finetune
from opi.relations import RelationSet
from opi.schemas import TrainConfig
from tests.helpers.mlflow_stores import empty_store, experiment

RELATIONS = RelationSet("tiny", {"deductive": "follows necessarily", "fuzzy": "follows loosely",
                                 "causal": "one causes the other"})


def example(i: int, relation: str) -> Example:
    return Example(f"e{i}", f"Context {i}. It rained.", f"Question {i}?", f"Answer {i}", relation)


def split(train: list[Example], test: list[Example], short: int = 0) -> Split:
    return Split(RELATIONS, train, test, short)


TRAIN = [example(0, "deductive"), example(1, "fuzzy"), example(2, "causal")]
TEST = [example(3, "deductive"), example(4, "deductive"), example(5, "fuzzy"), example(6, "causal")]


@pytest.fixture
def active_run(tmp_path):
    """An MLflow run of the fluent API in a store of the test's own (as ``train_and_evaluate`` opens one)."""
    before = mlflow.get_tracking_uri()
    uri = empty_store(tmp_path)
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient(uri)
    try:
        with mlflow.start_run(experiment_id=experiment(client, tmp_path, "opi-classifier")) as run:
            yield client, run.info.run_id
    finally:
        mlflow.set_tracking_uri(before)


def test_a_split_gives_its_examples_as_triples_and_their_labels():
    s = split(TRAIN, TEST)
    triples = s.triples(TEST[:2])
    assert [(t.text, t.question, t.answer) for t in triples] == [
        ("Context 3. It rained.", "Question 3?", "Answer 3"), ("Context 4. It rained.", "Question 4?", "Answer 4")]
    assert s.labels(TEST) == ["deductive", "deductive", "fuzzy", "causal"]


def test_the_balanced_split_counts_and_says_the_relations_that_are_short(monkeypatch, caplog):
    pool = [example(i, "deductive") for i in range(4)] + [example(10, "fuzzy")]
    monkeypatch.setattr(classifier, "load_data", lambda cfg: SimpleNamespace(pool=pool, relation_set=RELATIONS))
    cfg = SimpleNamespace(train=SimpleNamespace(per_relation=2, test_fraction=0.5), seed=0)
    with caplog.at_level(logging.WARNING, logger="opi"):
        found = balanced(cfg)
    # deductive: 2 of its 4, one to test; fuzzy: its one example, round(0.5) = 0 to test
    assert found.relation_set is RELATIONS and found.short == 1
    assert sorted(e.relation for e in found.train) == ["deductive", "fuzzy"]
    assert [e.relation for e in found.test] == ["deductive"]
    assert {e.id for e in found.train + found.test} <= {e.id for e in pool}
    assert "relation 'fuzzy' has 1 examples, fewer than per_relation=2" in caplog.text
    assert balanced(cfg) == found  # the same seed, the same split


def test_a_split_too_small_for_what_is_asked_is_said_before_any_run():
    def cfg(backend="local", cv_folds=2, evaluate=True):
        return SimpleNamespace(train=TrainConfig(backend=backend, cv_folds=cv_folds, evaluate=evaluate,
                                                 per_relation=3, test_fraction=0.2))

    assert split_problem(cfg(), split(TRAIN + [example(7, "fuzzy")], TEST)) is None  # fuzzy has the 2 folds need
    assert split_problem(cfg(), split(TRAIN, TEST)) == (
        "train.cv_folds=2 needs a relation with at least 2 training examples, and the most any has is 1 "
        "(train.per_relation=3, train.test_fraction=0.2): raise train.per_relation, or lower train.cv_folds")
    assert split_problem(cfg(), split(TRAIN[:1] * 3, TEST)) == (
        "the training split holds 1 relation (deductive): a classifier is trained on at least 2; check the data's "
        "relation labels")
    assert split_problem(cfg(backend="none"), split(TRAIN[:1], TEST)) is None  # nothing trained, so nothing to fit
    empty = "the test split is empty: train.per_relation=3 x train.test_fraction=0.2 rounds to no test example"
    assert split_problem(cfg(backend="none"), split(TRAIN, [])).startswith(empty)
    assert split_problem(cfg(backend="none", evaluate=False), split(TRAIN, [])) is None


def test_the_run_is_named_by_what_trains_and_the_split():
    s = split(TRAIN, TEST)
    llm, local = SimpleNamespace(name="llm-clf", trains=False), SimpleNamespace(name="local-clf", trains=True)

    def cfg(backend, clf):
        return SimpleNamespace(classifier=clf, llm=SimpleNamespace(name="gpt-4o"),
                               train=SimpleNamespace(backend=backend, base_model="gpt-4o-2024-08-06"))

    assert run_name(cfg("local", llm), s) == "local-clf (trained) | 3/4 split"
    assert run_name(cfg("openai", llm), s) == "fine-tune gpt-4o-2024-08-06 | 3/4 split"
    assert run_name(cfg("none", local), s) == "local-clf | 3/4 split"  # evaluated as configured
    assert run_name(cfg("none", llm), s) == "llm-clf (gpt-4o) | 3/4 split"  # an LLM: which one


def test_the_test_scores_are_logged_with_each_relations_precision_and_recall(active_run, tmp_path):
    client, run_id = active_run
    predicted = ["deductive", "fuzzy", "fuzzy", "unknown"]  # gold: deductive, deductive, fuzzy, causal
    metrics = log_test_scores(split(TRAIN, TEST), predicted, {"parse_failures": 1.0}, "llm-clf")
    expected = {"accuracy": 0.5, "unknown_predictions": 1.0, "chance_accuracy": pytest.approx(1 / 3),
                "parse_failures": 1.0,
                "precision.deductive": 1.0, "recall.deductive": 0.5,  # 1 of 1 said, 1 of 2 found
                "precision.fuzzy": 0.5, "recall.fuzzy": 1.0,  # 1 of 2 said, 1 of 1 found
                "precision.causal": 0.0, "recall.causal": 0.0,
                # F1: deductive 2/3, fuzzy 2/3, causal 0
                "macro_f1": pytest.approx(4 / 9)}
    assert {k: metrics[k] for k in expected} == expected
    logged = client.get_run(run_id).data.metrics
    assert {k: logged[k] for k in expected} == expected
    assert {a.path for a in client.list_artifacts(run_id)} >= {"confusion_matrix.png", "per_relation.csv",
                                                               "test_predictions.csv", "per_relation.json"}
    rows = pd.read_csv(client.download_artifacts(run_id, "test_predictions.csv", str(tmp_path)))
    assert rows.to_dict("list") == {"id": ["e3", "e4", "e5", "e6"],
                                    "relation": ["deductive", "deductive", "fuzzy", "causal"],
                                    "predicted": predicted}


class FineTuning:
    """``opi.llm.finetune``'s job calls, answered here: the job found or created, then ended with ``status``."""

    def __init__(self, status="succeeded"):
        self.status, self.calls = status, []

    def find_or_create_job(self, client, path, report, base_model, suffix, seed, n_epochs, log):
        self.calls.append(("find", Path(path), report, base_model, suffix, seed, n_epochs))
        return SimpleNamespace(id="ftjob-1"), True

    def wait_for_job(self, client, job_id, first, most, timeout, log):
        self.calls.append(("wait", job_id, first, most, timeout))
        return SimpleNamespace(id=job_id, status=self.status, fine_tuned_model="ft:gpt-4o:opi:1",
                               error="bad file" if self.status == "failed" else None)


@pytest.fixture
def tuning(monkeypatch, tmp_path):
    jobs = FineTuning()
    monkeypatch.setattr(finetune, "find_or_create_job", jobs.find_or_create_job)
    monkeypatch.setattr(finetune, "wait_for_job", jobs.wait_for_job)
    monkeypatch.setattr(classifier, "client_for", lambda llm, cache: SimpleNamespace(openai=lambda: "openai"))
    cfg = SimpleNamespace(train=TrainConfig(backend="openai", n_epochs=3, first_poll_seconds=1.0), seed=7,
                          paths=SimpleNamespace(cache_dir=str(tmp_path / "cache"), llm_cache="calls.sqlite"),
                          llm=SimpleNamespace(name="openai-compatible"))
    return jobs, cfg


def test_fine_tuning_writes_its_training_file_whole_under_its_contents_name(active_run, tuning, capsys):
    client, run_id = active_run
    jobs, cfg = tuning
    assert fine_tune(cfg, split(TRAIN, TEST)) == "ft:gpt-4o:opi:1"
    folder = Path(cfg.paths.cache_dir).resolve() / "finetune"
    (path,) = folder.iterdir()  # no .part file left
    raw = path.read_bytes()
    assert path.name == f"train-{hashlib.sha256(raw).hexdigest()[:16]}.jsonl"
    lines = raw.decode().splitlines()
    assert lines == finetune.training_lines(split(TRAIN, TEST).triples(TRAIN), ["deductive", "fuzzy", "causal"],
                                            RELATIONS)
    assert [json.loads(line)["messages"][-1] for line in lines] == [
        {"role": "assistant", "content": label} for label in ("deductive", "fuzzy", "causal")]
    (find, wait) = jobs.calls
    assert find[1] == path and find[3:] == ("gpt-4o-2024-08-06", "opi-relations", 7, 3)
    assert find[2].examples == 3 and find[2].sha256 == hashlib.sha256(raw).hexdigest()
    assert wait == ("wait", "ftjob-1", 1.0, 600.0, 86400.0)
    run = client.get_run(run_id)
    assert run.data.metrics["finetune_examples"] == 3
    assert run.data.tags["opi.finetune_job"] == "ftjob-1" and run.data.tags["opi.finetune_created"] == "True"
    assert run.data.tags["opi.fine_tuned_model"] == run.data.params["fine_tuned_model"] == "ft:gpt-4o:opi:1"
    assert [a.path for a in client.list_artifacts(run_id, "finetune")] == [f"finetune/{path.name}"]
    assert ("opi-eval llm=openai-compatible classifier=finetuned classifier.model=ft:gpt-4o:opi:1"
            in capsys.readouterr().out)


def test_a_fine_tuning_job_that_does_not_succeed_fails_the_command(active_run, tuning):
    client, run_id = active_run
    jobs, cfg = tuning
    jobs.status = "failed"
    with pytest.raises(RuntimeError, match="fine-tuning job ftjob-1 ended failed: bad file"):
        fine_tune(cfg, split(TRAIN, TEST))
    assert "opi.fine_tuned_model" not in client.get_run(run_id).data.tags


def test_a_training_file_without_every_label_is_refused_before_any_job(active_run, tuning):
    jobs, cfg = tuning
    with pytest.raises(ValueError, match=r"no training example for \['causal'\]"):
        fine_tune(cfg, split(TRAIN[:2], TEST))
    assert jobs.calls == []
    assert not list((Path(cfg.paths.cache_dir).resolve() / "finetune").glob("train-*.jsonl"))  # no final file


@pytest.fixture
def cfg():
    from flows.run.config import compose_config, typed

    return typed(compose_config(["dataset=deeplogic-130"], config_name="train_classifier"))


def test_a_just_trained_pipeline_labels_the_test_split_at_no_llm_cost(cfg):
    class Pipeline:
        def predict(self, frame):
            self.frame = frame
            return ["fuzzy"] * len(frame)

    fitted = Pipeline()
    predicted, usage = predict(cfg, split(TRAIN, TEST), fitted=fitted)
    assert predicted == ["fuzzy"] * 4 and usage == {}
    assert list(fitted.frame["question"]) == ["Question 3?", "Question 4?", "Question 5?", "Question 6?"]


def test_a_just_fine_tuned_model_is_asked_in_its_training_format(cfg, monkeypatch):
    asked = {}

    class Client:
        usage = SimpleNamespace(as_metrics=lambda prefix: {f"{prefix}_calls": 4.0})

        def ask_json(self, conversations, reply_format, parse, retries, reminder, progress):
            asked.update(conversations=conversations, reply_format=reply_format)
            return ["deductive", None, "fuzzy", "causal"], 1  # one reply that could not be read

    def client_for(llm, cache, model=None):
        asked["model"] = model
        return Client()

    monkeypatch.setattr(classifier, "client_for", client_for)
    cfg = replace(cfg, classifier=LLMRelationClassifier())
    predicted, usage = predict(cfg, split(TRAIN, TEST), model_id="ft:gpt-4o:opi:1")
    assert predicted == ["deductive", "unknown", "fuzzy", "causal"]
    assert usage == {"llm_classify_calls": 4.0, "parse_failures": 1.0}
    assert asked["model"] == "ft:gpt-4o:opi:1" and asked["reply_format"] is None  # no JSON schema: its own format
    assert [m["role"] for m in asked["conversations"][0]] == ["system", "user"]
    assert asked["conversations"][0][1]["content"] == ("Context:\nContext 3. It rained.\n\nQuestion: Question 3?\n\n"
                                                       "Answer: Answer 3")


def test_the_family_that_cross_validates_best_is_fitted_on_all_of_train_and_registered(cfg, active_run,
                                                                                       monkeypatch):
    """Stand-in families whose accuracy is known: ``logreg`` says the majority relation (2 of each fold's 3),
    ``linear_svc`` always the minority one (1 of 3)."""
    from sklearn.dummy import DummyClassifier

    client, run_id = active_run
    built = []

    def pipeline(family, C, seed, model, device, words, endpoint):
        built.append((family, C, seed, words))
        return (DummyClassifier(strategy="most_frequent") if family == "logreg"
                else DummyClassifier(strategy="constant", constant="fuzzy"))

    monkeypatch.setattr(classifier, "relation_pipeline", pipeline)
    log_model = mlflow.sklearn.log_model  # as it is, but without inferring pip requirements (a subprocess, seconds)
    monkeypatch.setattr(mlflow.sklearn, "log_model", lambda *a, **k: log_model(*a, pip_requirements=[], **k))
    train = [example(i, "deductive") for i in range(4)] + [example(i, "fuzzy") for i in range(4, 6)]
    cfg = replace(cfg, train=TrainConfig(cv_folds=2, register_name="clf", alias="candidate"), seed=3)
    fitted, scores = classifier.fit_local(cfg, split(train, TEST))
    assert scores == {"cv_accuracy.logreg": pytest.approx(2 / 3), "cv_accuracy.linear_svc": pytest.approx(1 / 3)}
    assert [family for family, *_ in built] == ["logreg", "linear_svc", "logreg"]  # the best, fitted once more
    assert built[0][1:] == (cfg.classifier.C, 3, cfg.classifier.question_words)
    assert list(fitted.predict(pd.DataFrame({"x": [1, 2]}))) == ["deductive", "deductive"]  # fitted on all of train
    version = client.get_model_version_by_alias("clf", "candidate")
    assert str(version.version) == "1" and version.run_id == run_id
    tags = client.get_run(run_id).data.tags
    assert tags["opi.classifier_family"] == "logreg" and tags["opi.registered_version"] == "1"


def test_a_training_run_the_user_stopped_is_killed_and_one_that_failed_is_failed(tmp_path, process_stop):
    # MLflow's own context marked a Ctrl-C'd training run FAILED, unlike a sweep's runs
    before = mlflow.get_tracking_uri()
    uri = empty_store(tmp_path)
    mlflow.set_tracking_uri(uri)
    experiment_id = experiment(mlflow.MlflowClient(uri), tmp_path, "opi-classifier")  # not another test's active one
    ended = []
    try:
        for stopped in (False, True):
            if stopped:
                process_stop.set()
            with pytest.raises(KeyboardInterrupt if stopped else ValueError):
                with mlflow.start_run(experiment_id=experiment_id) as run, classifier.killed_when_stopped():
                    raise KeyboardInterrupt if stopped else ValueError("a bug")
            ended.append(mlflow.get_run(run.info.run_id).info.status)
    finally:
        mlflow.set_tracking_uri(before)
    assert ended == ["FAILED", "KILLED"]
