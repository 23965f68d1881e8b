"""What a sweep's parent and children show in MLflow when it ends: children named by what varies in the sweep (their
full descriptions in tags, the stable names the nightly gate matches unchanged), the sweep's settings as the
parent's params, descriptions saying the verdict and each child's place, no unexplained metric."""
import json

import mlflow
import pandas as pd
import pytest

from flows.run.identity import Identity
from flows.tracking import runs
from flows.tracking.notes import NOTE, ordinal, with_interval
from flows.tracking.sweep_report import REPORT_FILES, VIEW_TAG, log_sweep_summary
from flows.tracking.sweeps import children, configuration_names
from opi.schemas import TrackingConfig


def child(tracking, identity: Identity, params: dict, metrics: dict) -> str:
    """A configuration's run as outputs.record logs it (named by its retrieval, described by its tags)."""
    return runs.log_run(tracking, identity.retrieval, params, metrics, {},
                        {"opi.role": "configuration", **identity.tags(), **identity.description_tags()})


@pytest.fixture
def logged_sweep(tmp_path, monkeypatch):
    """A sweep of kNN at k=2 and k=4, BM25 and the random bound, its children logged, not yet summarised."""
    tracking = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", artifact_location=str(tmp_path / "a"))
    client = mlflow.MlflowClient(tracking.tracking_uri)
    parent = client.create_run(client.create_experiment("opi"), tags={"opi.role": "sweep"}).info.run_id
    monkeypatch.setenv(runs.PARENT_ENV, parent)
    knn, bm25 = (Identity(s, "single", (s,), s, "extractive", "local-clf") for s in ("kNN", "BM25"))
    random = Identity("Random", "single", ("Random",), "Random", "extractive", "local-clf", "lower")
    logged = {}
    for identity, k, opi in ((knn, 2, 0.31), (knn, 4, 0.35), (bm25, 4, 0.33), (random, 4, 0.05)):
        settings = {"retriever": {"name": identity.setup, "k": k}, "seed": 0, "dataset": {"name": "deeplogic-v2"}}
        metrics = {"opi_1": opi, "opi_1_ci_low": opi - 0.04, "opi_1_ci_high": opi + 0.03, "bertsim": opi + 0.1,
                   "lrcr": opi - 0.1, "bertsim.causal": 0.5}
        logged[child(tracking, identity, settings, metrics)] = (identity, k, metrics)
    return client, parent, logged


def test_the_summary_renames_the_children_and_describes_the_ranking(logged_sweep):
    client, parent, logged = logged_sweep
    before = configuration_names(children(client, parent))
    log_sweep_summary(client, parent)
    found = {run.info.run_id: run for run in children(client, parent)}
    assert {found[i].info.run_name for i in logged} == {"kNN k=2", "kNN k=4", "BM25", "Random"}
    assert configuration_names(list(found.values())) == before  # the names the nightly gate matches, unchanged
    for run_id, (identity, _, _) in logged.items():
        assert found[run_id].data.tags["opi.description"] == identity.name  # kNN | extractive | local-clf
    contenders = sorted((m["opi_1"], i) for i, (identity, _, m) in logged.items() if identity.bound is None)[::-1]
    for place, (_, run_id) in enumerate(contenders, start=1):
        m = logged[run_id][2]
        assert found[run_id].data.tags[NOTE] == (f"{ordinal(place)} of 3 by OPI-1: "
                                                 f"{with_interval(m['opi_1'], m['opi_1_ci_low'], m['opi_1_ci_high'])}")
    (random,) = [i for i, (identity, _, _) in logged.items() if identity.bound]
    assert found[random].data.tags[NOTE].startswith("the lower bound (random retrieval), a reference point")
    parent_run = client.get_run(parent)
    assert parent_run.data.params == {"seed": "0", "dataset.name": "deeplogic-v2"}  # what every child shares
    assert set(parent_run.data.metrics) == {"configurations"}
    note = parent_run.data.tags[NOTE]
    assert note.startswith("**4 configurations ranked by OPI-1** (reader extractive, classifier local-clf, data "
                           "deeplogic-v2)")
    rows = [line for line in note.splitlines() if line.startswith("|")][2:]
    assert [row.split("|")[2].strip() for row in rows] == ["kNN k=4", "BM25", "kNN k=2", "Random"]
    assert f"opi-report --sweep {parent}" in note
    view = json.loads(client.get_experiment(parent_run.info.experiment_id).tags[VIEW_TAG + parent])
    assert view["searchFilter"] == f"tags.mlflow.parentRunId = '{parent}'" and view["runsHiddenMode"] == "SHOW_ALL"
    assert view["orderByKey"] == "metrics.`opi_1`" and "metrics.`opi_1_ci_low`" in view["selectedColumns"]


def test_a_summary_run_twice_changes_nothing(logged_sweep):
    client, parent, _ = logged_sweep
    log_sweep_summary(client, parent)
    first = {run.info.run_id: (run.info.run_name, run.data.tags[NOTE]) for run in children(client, parent)}
    log_sweep_summary(client, parent)  # opi-label answers import calls it again
    assert {run.info.run_id: (run.info.run_name, run.data.tags[NOTE]) for run in children(client, parent)} == first


def test_a_finished_sweep_shows_its_report_on_its_run_pages(finished_sweep, tmp_path):
    """The smoke sweep (kNN and BM25) as it ended: its report's verdict and ranking the parent's description, each
    child's place and verdict as the report computed them."""
    _, uri, parent, _ = finished_sweep
    client = mlflow.MlflowClient(uri)
    found = children(client, parent)
    assert sorted(run.info.run_name for run in found) == ["BM25", "kNN"]
    assert {run.data.tags["opi.description"] for run in found} == {"kNN | extractive | local-clf",
                                                                  "BM25 | extractive | local-clf"}
    overall = pd.read_csv(client.download_artifacts(parent, "report/overall.csv", str(tmp_path)))
    best = overall.loc[overall["verdict"] == "best", "configuration"].iloc[0]
    by_name = {run.info.run_name: run for run in found}
    for place, row in enumerate(overall.to_dict("records"), start=1):
        line = by_name[row["configuration"]].data.tags[NOTE]
        assert line.startswith(f"{ordinal(place)} of 2 by OPI-1: "
                               f"{with_interval(row['opi_1'], row['opi_1_ci_low'], row['opi_1_ci_high'])}; ")
        assert line.endswith("the best" if row["verdict"] == "best" else f"from the best ({best}), adjusted p = "
                             f"{row['p_adjusted']:.3g}" if row["verdict"] == "not distinguishable" else
                             f"than the best ({best}), adjusted p = {row['p_adjusted']:.3g}")
    run = client.get_run(parent)
    assert run.data.tags[NOTE].endswith(REPORT_FILES) and best in run.data.tags[NOTE]
    assert set(run.data.metrics) == {"configurations", "best_opi_1"}
    assert run.data.metrics["best_opi_1"] == pytest.approx(overall["opi_1"].max())
    assert run.data.params["sweep.setup"] == "knn,bm25" and run.data.params["experiment"] == "smoke"
    assert run.data.params["dataset.limit"] == "3" and "retriever.name" not in run.data.params  # shared, swept


def test_opi_report_says_where_it_wrote(finished_sweep, tmp_path, caplog):
    from pathlib import Path
    from urllib.parse import urlparse

    from flows.cli import report

    _, uri, parent, _ = finished_sweep
    with caplog.at_level("INFO", logger="opi"):
        report.main(["--tracking-uri", uri, "--sweep", parent, "--out", str(tmp_path / "copy")])
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("report logged to")]
    artifacts = mlflow.MlflowClient(uri).get_run(parent).info.artifact_uri + "/report"
    assert f"the sweep's parent run {parent}" in line and f"at {artifacts} " in line
    assert (Path(urlparse(artifacts).path) / "report.html").is_file()  # the address is where the files are
    assert line.endswith(f"copied to {tmp_path / 'copy'}") and (tmp_path / "copy" / "report.md").is_file()


def test_the_parent_names_each_swept_setting_as_the_sweeper_reads_it():
    from omegaconf import OmegaConf

    from flows.tracking.parent import sweep_params, swept

    config = OmegaConf.create({"hydra": {"sweeper": {"params": {"setup": "knn,bm25", "retriever.k": "2,4"}},
                                         "overrides": {"task": ["experiment=smoke", "setup=a_four",
                                                                "llm.temperature=0,0.5", "dataset.limit=3"]}}})
    assert swept(config) == {"retriever.k": "2,4", "llm.temperature": "0,0.5"}  # setup=a_four replaced the sweep
    params = {p.key: p.value for p in sweep_params(config, "smoke", "experiment=smoke setup=a_four")}
    assert params == {"experiment": "smoke", "overrides": "experiment=smoke setup=a_four", "sweep.retriever.k": "2,4",
                      "sweep.llm.temperature": "0,0.5"}
