"""``opi-eval -m ... sweep.strategy=race`` as a user runs it: a progress line per round, the worse dropped, each
configuration's MLflow run recording its outcome, the parent's race table and verdict; what cannot be raced is one
line, exit 2, before any work."""
import re

import mlflow
import pandas as pd
import pytest

from flows.tracking.sweeps import display_names
from tests.helpers.cli import run_cli

# 12 articles of 8 questions: 4 rounds of 3 clusters
SMALL = ("dataset.limit=96", "race.rounds=4", "race.min_clusters=3", "classifier.folds=2")


@pytest.mark.slow
def test_a_race_logs_one_run_per_configuration_with_its_outcome_each_its_rounds_put_together(tmp_path):
    # a union of grids, whose jobs differ in length: kNN's sets retriever.k (its default), the others' do not
    log = run_cli("flows.cli.evaluate", tmp_path, "-m", "hydra.sweeper.grids=[{setup:knn,retriever.k:4},"
                  "{setup:'bm25,random'}]", "sweep.strategy=race", "race.metric=bertsim", *SMALL)
    assert ("racing 2 configurations on 96 examples in 4 rounds of whole clusters, by bertsim (alpha 0.05); the 1 "
            "bound(s) run once, at the end, on the rounds the race ran") in log
    rounds = [line.split("] ", 1)[1] for line in log.splitlines() if re.search(r"\] round \d/4: ", line)]
    assert rounds and all(re.fullmatch(r"round \d/4: \d+ examples so far, [12] of 2 configurations left, \d+ "
                                       r"example evaluations, 0 LLM calls, \$0\.00 spent", line) for line in rounds)
    # with Hydra's basic launcher a round's configurations run side by side in the sweep's process: the only jobs
    # launched are the three tracked runs
    assert sorted(p.name for p in (tmp_path / "multirun").iterdir() if p.name.isdigit()) == ["0", "1", "2"]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("opi")
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'sweep'")
    children = client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'configuration'")
    assert len(children) == 3  # the rounds' jobs are not tracked: one run per configuration
    outcome = {run.data.tags["opi.description"].split(" |")[0]: run for run in children}
    assert set(outcome) == {"kNN", "BM25", "Random"}
    for run in children:
        assert run.data.tags["opi.race.outcome"] in (("bound",) if run is outcome["Random"] else
                                                     ("survivor", "eliminated"))
        assert run.data.tags["opi.race.metric"] == "bertsim"
    table = pd.read_csv(client.download_artifacts(parent.info.run_id, "race/race.csv", str(tmp_path)))
    assert list(table.columns[:7]) == ["configuration", "overrides", "outcome", "rounds_run", "clusters", "examples",
                                       "bertsim"]
    shown, _ = display_names(children)  # the names the sweep's comparison table gives the runs
    survivors = set(table.loc[table["outcome"] == "survivor", "configuration"])
    by_run = {r.data.tags["opi.race.outcome"] for r in children}
    assert by_run <= {"survivor", "eliminated", "bound"} and len(survivors) >= 1
    # each raced configuration's tracked run holds the examples of the rounds it ran (a bound ran on all of them)
    for label, examples, kind, called in zip(table["overrides"], table["examples"], table["outcome"],
                                             table["configuration"]):
        name = {"setup=knn retriever.k=4": "kNN", "setup=bm25": "BM25", "setup=random": "Random"}[label]
        assert called == shown[outcome[name].info.run_id]  # the race table names it as the sweep's tables do
        rows = pd.read_parquet(client.download_artifacts(outcome[name].info.run_id, "predictions.parquet",
                                                         str(tmp_path / name)))
        assert len(rows) == (96 if kind == "bound" else examples) and (kind == "bound") == (label == "setup=random")
    assert parent.data.tags["opi.race"].endswith("survived, by bertsim")
    # a tracked run is its rounds' results put together, nothing computed again, and equals evaluating those rounds'
    # examples at once
    assert log.count("assembled from the") >= 1
    knn = outcome["kNN"]
    rounds = knn.data.tags["opi.race.rounds_run"].split(" of ")[0]
    direct = tmp_path / "direct"
    direct.mkdir()
    run_cli("flows.cli.evaluate", direct, "setup=knn", "dataset.rounds=4", f"dataset.rounds_to={rounds}", *SMALL,
            "tracking.traces=none")
    (alone,) = mlflow.MlflowClient(f"sqlite:///{direct}/mlflow.db").search_runs(
        [mlflow.MlflowClient(f"sqlite:///{direct}/mlflow.db").get_experiment_by_name("opi").experiment_id])
    for name in ("bertsim", "lrcr", "opi_1", "bertsim_ci_low", "opi_1_ci_high", "ndcg_at_4", "mrr", "n_examples"):
        assert knn.data.metrics[name] == pytest.approx(alone.data.metrics[name]), name
    note = client.get_run(parent.info.run_id).data.tags["mlflow.note.content"]
    assert note.startswith("**Race.** Race of 2 configurations by bertsim") and "confidence" in note
    verdict = note.split(" The race table")[0]  # names the survivors as the tables do, not by their overrides
    assert all(name in verdict for name in survivors) and "setup=" not in verdict
    # opi-report on a raced sweep: the survivors' report, and the race
    said = run_cli("flows.cli.report", tmp_path, "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db", "--sweep",
                   parent.info.run_id, "--out", str(tmp_path / "copy"))
    assert "Race of 2 configurations by bertsim" in said and "the parent run's race/race.md" in said
    assert (tmp_path / "copy" / "race.md").read_text().startswith("# Race")
    assert "nan" not in (tmp_path / "copy" / "race.md").read_text()
    rebuilt = client.get_run(parent.info.run_id).data.tags["mlflow.note.content"]
    assert rebuilt.startswith("**Race.** Race of 2 configurations by bertsim")  # the report kept the verdict first
    assert "**Raced sweep**: a race in which " in (tmp_path / "copy" / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("overrides, line", [
    (("setup=knn", "sweep.strategy=race"), "sweep.strategy=race races the configurations of a sweep"),
    (("-m", "setup=knn", "sweep.strategy=race"), "needs at least two configurations"),
    (("-m", "setup=knn,bm25", "sweep.strategy=race", "race.budget=0"), "race.budget must be a finite number > 0"),
    (("-m", "setup=knn,bm25", "sweep.strategy=race", "race.metric=latency"), "not a per-example metric"),
    (("-m", "setup=knn,bm25", "sweep.strategy=race", "race.metric=ndcg_at_3"), "for k in metrics.retrieval_k"),
    (("-m", "setup=knn,knn", "sweep.strategy=race"), "lists one configuration twice"),
])
def test_what_cannot_be_raced_is_one_line_and_exit_2_before_any_work(tmp_path, overrides, line):
    log = run_cli("flows.cli.evaluate", tmp_path, *overrides, expect=2)
    assert line in log and "Launching" not in log and "MLflow parent run" not in log
