"""A race's round side by side in this process: every configuration checked before any work, evaluated at once
(up to race.side_by_side), results in the round's order, a failure raised after the others end."""
import threading

import pandas as pd
import pytest

from flows.run import race_rounds
from opi.data import DataError


@pytest.fixture
def fake_evaluation(monkeypatch):
    """Configurations are names; evaluating one waits until ``together`` are running (or 2 s), then returns one row
    naming it and the most that ran at once."""
    state = {"running": 0, "most": 0, "checked": [], "together": 1, "fail": None}
    lock, changed = threading.Lock(), threading.Condition()

    def prepared(config):
        state["checked"].append((config, state["running"]))
        return config

    def evaluate(config):
        with changed:
            state["running"] += 1
            state["most"] = max(state["most"], state["running"])
            changed.notify_all()
            changed.wait_for(lambda: state["running"] >= state["together"], timeout=2)
        try:
            if config == state["fail"]:
                raise DataError(f"{config} failed")
            return {"predictions": pd.DataFrame({"name": [config]}), "metrics": {"n": 1.0, "none": None}}
        finally:
            with lock:
                state["running"] -= 1

    def evaluate_started(config):
        state.setdefault("started", []).append(config)
        return evaluate(config)

    monkeypatch.setattr(race_rounds, "prepared", prepared)
    monkeypatch.setattr(race_rounds, "evaluate", evaluate_started)
    monkeypatch.setattr(race_rounds, "embeds_articles", lambda config: config.startswith("dense"))
    monkeypatch.setattr(race_rounds, "models_to_load", lambda configs: [lambda: state.setdefault(
        "loaded", (threading.current_thread().name, len(state.get("started", []))))])
    return state


def test_a_rounds_configurations_run_at_once_and_come_back_in_order(fake_evaluation):
    fake_evaluation["together"] = 3
    evaluate_round = race_rounds.side_by_side(lambda job: job[0], at_once=3)
    results = evaluate_round([["a"], ["b"], ["c"], ["d"]])
    assert [rows["name"][0] for rows, _ in results] == ["a", "b", "c", "d"]
    assert [metrics for _, metrics in results] == [{"n": 1.0}] * 4  # as a job's metrics.json holds them
    assert fake_evaluation["most"] == 3  # three at once, not four
    assert [running for _, running in fake_evaluation["checked"]] == [0] * 4  # all checked before any work


def test_the_model_is_loaded_in_the_calling_thread_before_the_rounds_threads_start(fake_evaluation):
    # torch imported in a round's thread while another imported scikit-learn failed a race; a Ctrl-C waited for it
    race_rounds.side_by_side(lambda job: job[0], at_once=2)([["a"], ["b"]])
    assert fake_evaluation["loaded"] == (threading.current_thread().name, 0)


def test_those_that_embed_start_in_turn_with_those_that_do_not(fake_evaluation):
    # the sweep's order put the dense ones first: side by side they waited on one embedding, and the endpoint on them
    evaluate_round = race_rounds.side_by_side(lambda job: job[0], at_once=1)
    results = evaluate_round([["dense-1"], ["dense-2"], ["dense-3"], ["lexical-1"], ["lexical-2"]])
    assert fake_evaluation["started"] == ["dense-1", "lexical-1", "dense-2", "lexical-2", "dense-3"]
    assert [rows["name"][0] for rows, _ in results] == ["dense-1", "dense-2", "dense-3", "lexical-1", "lexical-2"]


def test_the_retrievers_that_embed_the_articles_are_the_dense_ones():
    from flows.run.config import compose_config, typed

    def embeds(*overrides):
        return race_rounds.embeds_articles(typed(compose_config(["dataset=deeplogic-130", *overrides])))

    assert embeds("setup=knn") and embeds("setup=mmr") and embeds("setup=a_two")
    assert not embeds("setup=bm25") and not embeds("setup=tfidf") and not embeds("setup=edi")


def test_one_at_a_time_when_asked(fake_evaluation):
    evaluate_round = race_rounds.side_by_side(lambda job: job[0], at_once=1)
    assert len(evaluate_round([["a"], ["b"]])) == 2 and fake_evaluation["most"] == 1


def test_a_failure_is_raised_once_the_others_end_and_said_once_by_the_command(fake_evaluation, caplog):
    fake_evaluation.update(together=2, fail="b")
    evaluate_round = race_rounds.side_by_side(lambda job: job[0], at_once=2)
    with pytest.raises(SystemExit) as stopped:
        evaluate_round([["a"], ["b"], ["c"]])
    assert stopped.value.code == 2 and fake_evaluation["running"] == 0
    # one line, from the round: not a traceback, nor one per configuration that was running
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == ["dataset problem: b failed"]


def test_each_configuration_runs_in_a_copy_of_the_callers_context(fake_evaluation, monkeypatch):
    # inside the nightly's flow run (a context variable), the configurations' flows are its subflows
    import contextvars

    seen, variable = [], contextvars.ContextVar("flow_run", default=None)

    def evaluate(config):
        seen.append(variable.get())
        variable.set(config)  # a flow run of its own, in its own copy
        return {"predictions": pd.DataFrame({"name": [config]}), "metrics": {}}

    monkeypatch.setattr(race_rounds, "evaluate", evaluate)
    variable.set("nightly")
    race_rounds.side_by_side(lambda job: job[0], at_once=2)([["a"], ["b"], ["c"]])
    assert seen == ["nightly"] * 3 and variable.get() == "nightly"


@pytest.mark.parametrize("launcher, here", [("basic", True), ("joblib", False)])
def test_rounds_run_here_only_with_hydras_basic_launcher(launcher, here):
    # another launcher (joblib, submitit) gets a race's rounds as its jobs, where it runs jobs
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from flows.run.race_sweep import in_this_process

    sweeper = SimpleNamespace(config=OmegaConf.create({"hydra": {"runtime": {"choices": {
        "hydra/launcher": launcher, "hydra/sweeper": "opi"}}}}))
    assert in_this_process(sweeper) is here


def test_a_races_job_is_split_at_the_sweeps_job_it_extends_whatever_the_jobs_lengths():
    from flows.run.race_sweep import base_size

    bases = {("retriever=knn",): 1, ("retriever=knn", "retriever.k=2"): 2, ("setup=a_two",): 3}
    rounds = ["dataset.rounds=10", "dataset.rounds_from=2", "dataset.rounds_to=2"]
    assert base_size(["retriever=knn", "retriever.k=2", *rounds], bases) == 2
    assert base_size(["retriever=knn", *rounds], bases) == 1
    assert base_size(["setup=a_two", *rounds, "race.record=true"], bases) == 1
    with pytest.raises(KeyError, match="no job of the sweep begins"):
        base_size(["setup=knn", *rounds], bases)


def test_each_distinct_yardstick_model_of_a_round_is_loaded_once():
    from flows.run.config import compose_config, typed

    def config(*overrides):
        return typed(compose_config(["dataset=deeplogic-130", *overrides]))

    same = [config("setup=knn"), config("setup=bm25"), config("setup=tfidf")]
    assert len(race_rounds.models_to_load(same)) == 1
    other = config("setup=bm25", "metrics.similarity.model=sentence-transformers/all-mpnet-base-v2")
    assert len(race_rounds.models_to_load([*same, other])) == 2
    assert race_rounds.models_to_load([config("setup=knn", "orchestration=dask")]) == []  # Dask's workers load theirs


def test_a_model_that_cannot_load_ends_the_round_in_one_line(monkeypatch, caplog):
    from flows.base.errors import CommandError

    def unavailable():
        raise CommandError("model problem: no such model")

    monkeypatch.setattr(race_rounds, "prepared", lambda config: config)
    monkeypatch.setattr(race_rounds, "models_to_load", lambda configs: [unavailable])
    monkeypatch.setattr(race_rounds, "evaluate", lambda config: pytest.fail("a configuration ran"))
    with pytest.raises(SystemExit) as ended:
        race_rounds.side_by_side(lambda job: job[0], at_once=2)([["a"], ["b"]])
    assert ended.value.code == 2 and "model problem: no such model" in caplog.text
