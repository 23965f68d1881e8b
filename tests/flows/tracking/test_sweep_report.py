"""What a sweep's parent and children show in MLflow when it ends: children named by what varies in the sweep (their
full descriptions in tags, the stable names the nightly gate matches unchanged), the sweep's settings as the
parent's params, descriptions saying the verdict and each child's place, no unexplained metric."""
import json
from types import SimpleNamespace

import mlflow
import pandas as pd
import pytest
from mlflow import MlflowClient

from flows.base.errors import CommandError
from flows.run.identity import Identity
from flows.tracking import runs
from flows.tracking.notes import NOTE, ordinal, Placed, with_interval
from flows.tracking.sweep_report import (VIEW_TAG, comparison_table, configuration, log_shared_settings,
                                         log_sweep_summary, logged_intervals, ranked_metric, ranking_of_report,
                                         ranking_of_runs, share_view, sweep_configurations, where_written,
                                         yardstick_clash)
from flows.tracking.sweep_report import REPORT_FILES, VIEW_TAG, log_sweep_summary
from flows.tracking.sweeps import children, configuration_names, DESCRIPTION
from opi.report import ReportSettings
from opi.schemas import ReportConfig, TrackingConfig
from opi.yardstick import MODEL_TAG, TAG
from tests.helpers.mlflow_stores import empty_store, experiment


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


def test_a_race_s_eliminated_children_are_not_placed_among_the_survivors(logged_sweep):
    client, parent, logged = logged_sweep
    by_k = {(identity.setup, k): run_id for run_id, (identity, k, _) in logged.items()}
    for key, outcome in (((("kNN", 2), "eliminated")), (("kNN", 4), "survivor"), (("BM25", 4), "survivor"),
                         (("Random", 4), "bound")):
        client.set_tag(by_k[key], "opi.race.outcome", outcome)
    client.set_tag(by_k["kNN", 2], "opi.race.rounds_run", "3 of 10")
    client.set_tag(by_k["kNN", 2], "opi.race.against", "kNN k=4: -0.0400 [-0.0700, -0.0100]")
    log_sweep_summary(client, parent)
    found = {run.info.run_id: run.data.tags[NOTE] for run in children(client, parent)}
    assert found[by_k["kNN", 4]].startswith("1st of 2 by OPI-1")
    assert found[by_k["BM25", 4]].startswith("2nd of 2 by OPI-1")
    assert found[by_k["kNN", 2]] == ("eliminated after round 3 of 10 of the race, so not ranked with the survivors: "
                                     f"OPI-1 {with_interval(0.31, 0.27, 0.34)} on the examples of those rounds; "
                                     "against kNN k=4: -0.0400 [-0.0700, -0.0100] (the race table: the parent "
                                     "run's race/race.md)")
    note = client.get_run(parent).data.tags[NOTE]
    assert note.startswith("**3 configurations ranked by OPI-1** (reader extractive, classifier local-clf, data "
                           "deeplogic-v2; not ranked: the 1 the race eliminated, which ran on fewer examples "
                           "(the race table: race/race.md)); values with")
    rows = [line for line in note.splitlines() if line.startswith("|")][2:]
    assert [row.split("|")[2].strip() for row in rows] == ["kNN k=4", "BM25", "Random"]
    view = json.loads(client.get_experiment(client.get_run(parent).info.experiment_id).tags[VIEW_TAG + parent])
    assert view["selectedColumns"][:3] == ["tags.`opi.race.outcome`", "tags.`opi.race.rounds_run`", "metrics.`opi_1`"]


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


def test_a_re_run_sweep_reads_its_report_s_figures_back_instead_of_drawing_them(finished_sweep, tmp_path,
                                                                               monkeypatch):
    from flows.tracking.sweep_report import built_report
    from opi.report import SweepReport

    _, uri, parent, _ = finished_sweep
    client = mlflow.MlflowClient(uri)
    found = sweep_configurations(client, parent, ReportSettings(ReportConfig(), 1.0, 0), children(client, parent))
    report, figures = built_report(*found, str(tmp_path / "cache"))
    assert set(figures) == {"bars.png", "heatmap.png"} and figures == report.figures()
    monkeypatch.setattr(SweepReport, "figures", lambda self: pytest.fail("drawn again"))
    again, kept = built_report(*found, str(tmp_path / "cache"))
    assert kept == figures and again.overall.equals(report.overall)
    other = ReportSettings(ReportConfig(), 2.0, 0)  # another β: other tables, so other figures
    with pytest.raises(pytest.fail.Exception, match="drawn again"):
        built_report(found[0], found[1], other, str(tmp_path / "cache"))
    assert built_report(*found, None)[1] is None  # opi-report without a cache draws them as it writes


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


KNN, BM25 = "kNN | extractive | local-clf", "BM25 | extractive | local-clf"


def run(run_id, name, metrics=None, params=None, tags=None):
    """A run as MLflow's search returns it, for the functions that only read runs."""
    return SimpleNamespace(info=SimpleNamespace(run_id=run_id, run_name=name),
                           data=SimpleNamespace(metrics=metrics or {}, params=params or {}, tags=tags or {}))


def yardstick(key: str, model: str) -> dict:
    return {TAG: key, MODEL_TAG: model}


# comparison_table and ranked_metric


def test_the_comparison_table_is_best_first_with_the_headline_columns_only():
    runs = [run("a", "r-a", {"opi_1": 0.2, "bertsim": 0.5, "recall_at_4": 0.9}, tags={DESCRIPTION: KNN}),
            run("b", BM25, {"opi_1": 0.4, "bertsim": 0.6}),  # logged before the tag: named by its description
            run("c", "r-c", {"opi_1": 0.3}, tags={DESCRIPTION: "Random | extractive | local-clf"})]
    names = {"a": "kNN", "b": "BM25", "c": "Random"}
    table = comparison_table(runs, names)
    assert list(table.columns) == ["configuration", "description", "bertsim", "opi_1"]  # no recall_at_4
    assert list(table["configuration"]) == ["BM25", "Random", "kNN"] and list(table.index) == [0, 1, 2]
    assert list(table["description"]) == [BM25, "Random | extractive | local-clf", KNN]
    assert pd.isna(table.loc[1, "bertsim"])  # a run without it: empty, not zero
    assert list(comparison_table(runs, names, ranked=False)["configuration"]) == ["kNN", "BM25", "Random"]
    assert comparison_table([], {}).empty


def test_a_race_s_comparison_table_says_how_each_ended_and_puts_the_eliminated_last():
    race = {"opi.race.outcome": "eliminated", "opi.race.rounds_run": "2 of 10"}
    runs = [run("a", KNN, {"opi_1": 0.30}, tags={"opi.race.outcome": "survivor"}),
            run("b", BM25, {"opi_1": 0.45}, tags=race),  # higher, on the 2 rounds' examples only
            run("c", "Random", {"opi_1": 0.05}, tags={"opi.race.outcome": "bound"}),
            run("d", "SVM", {"opi_1": 0.35}, tags={"opi.race.outcome": "survivor"}),
            run("e", "EDI", {"opi_1": 0.20}, tags={**race, "opi.race.rounds_run": "1 of 10"}),
            run("f", "MMR", {"opi_1": 0.34}, tags={**race, "opi.race.rounds_run": "3 of 10", "opi.race.against":
                "setup=svm: -0.0100 [-0.0050, +0.0200], dropped as within race.indifference=0.01"})]
    names = {"a": "kNN", "b": "BM25", "c": "Random", "d": "SVM", "e": "EDI", "f": "MMR"}
    table = comparison_table(runs, names)
    assert list(table["configuration"]) == ["SVM", "kNN", "Random", "BM25", "MMR", "EDI"]
    assert list(table["race"]) == ["survivor", "survivor", "bound", "eliminated after round 2 of 10",
                                   "eliminated as within after round 3 of 10", "eliminated after round 1 of 10"]
    assert list(table.columns) == ["configuration", "description", "race", "opi_1"]
    assert "race" not in comparison_table([run("a", KNN, {"opi_1": 0.3})], {"a": "kNN"})  # a grid
    by_ndcg = {"opi.race.outcome": "survivor", "opi.race.metric": "ndcg_at_4"}
    table = comparison_table([run("a", KNN, {"opi_1": 0.30, "ndcg_at_4": 0.7}, tags=by_ndcg),
                              run("d", "SVM", {"opi_1": 0.35, "ndcg_at_4": 0.6}, tags=by_ndcg)], names)
    assert list(table.columns) == ["configuration", "description", "race", "opi_1", "ndcg_at_4"]
    assert list(table["configuration"]) == ["kNN", "SVM"]  # ranked by what the race ran on


def test_a_sweep_is_ranked_by_calibrated_opi_then_opi_then_bertsim():
    assert ranked_metric(pd.DataFrame(columns=["bertsim", "opi_1", "opi_1_calibrated"])) == "opi_1_calibrated"
    assert ranked_metric(pd.DataFrame(columns=["configuration", "bertsim", "opi_1"])) == "opi_1"
    assert ranked_metric(pd.DataFrame(columns=["configuration", "bertsim", "lrcr"])) == "bertsim"  # no relations


def test_calibrated_values_rank_the_table_when_people_labelled():
    runs = [run("a", KNN, {"opi_1": 0.5, "opi_1_calibrated": 0.1}), run("b", BM25, {"opi_1": 0.1,
                                                                                  "opi_1_calibrated": 0.4})]
    assert list(comparison_table(runs, {"a": "kNN", "b": "BM25"})["configuration"]) == ["BM25", "kNN"]


# ranking_of_runs and logged_intervals


def test_each_child_is_placed_by_the_metric_with_the_interval_it_logged():
    runs = [run("a", KNN, {"opi_1": 0.31, "opi_1_ci_low": 0.27, "opi_1_ci_high": 0.35}),
            run("b", BM25, {"bertsim": 0.7}),  # failed before its OPI: not placed
            run("c", "Random", {"opi_1": 0.05}, tags={"opi.bound": "lower"}),
            run("d", "SVM", {"opi_1": 0.4, "opi_1_ci_low": 0.33})]
    names = {"a": "kNN", "b": "BM25", "c": "Random", "d": "SVM"}
    assert ranking_of_runs(runs, names, "opi_1") == [Placed("d", "SVM", 0.4, 0.33, None, None),
                                                     Placed("a", "kNN", 0.31, 0.27, 0.35, None),
                                                     Placed("c", "Random", 0.05, None, None, "lower")]


def test_the_intervals_of_the_headline_metrics_each_child_logged():
    runs = [run("a", KNN, {"opi_1": 0.31, "opi_1_ci_low": 0.27, "opi_1_ci_high": 0.35, "bertsim": 0.6,
                           "cache_hits": 4.0, "recall_at_4": 0.8}), run("b", BM25, {})]
    assert logged_intervals(runs) == {"a": {"opi_1": (0.31, 0.27, 0.35), "bertsim": (0.6, None, None)}, "b": {}}


# configuration and ranking_of_report


def test_a_child_as_the_report_reads_it():
    frame = pd.DataFrame({"id": ["e1"]})
    child = run("a", "x", {"opi_1": 0.3, "opi_1_calibrated": 0.2, "lrcr_calibrated": 0.5, "labels_used": 12.0},
                tags={"opi.kind": "A-", "opi.setup": "A-Four", "opi.bound": "upper"})
    found = configuration(child, "A-Four", frame)
    assert (found.name, found.kind, found.setup, found.bound) == ("A-Four", "A-", "A-Four", "upper")
    assert found.predictions is frame
    assert found.calibrated == (("labels_used", 12.0), ("lrcr_calibrated", 0.5), ("opi_1_calibrated", 0.2))
    plain = configuration(run("b", "y"), "kNN k=2", frame)  # logged before its identity tags
    assert (plain.kind, plain.setup, plain.bound, plain.calibrated) == ("single", "kNN k=2", None, ())


def test_the_reports_ranking_with_its_verdicts_by_run():
    overall = pd.DataFrame({"configuration": ["SVM", "kNN", "Random"], "opi_1": [0.4, 0.31, 0.05],
                            "opi_1_ci_low": [0.33, 0.27, 0.01], "opi_1_ci_high": [0.45, 0.35, 0.09],
                            "bound": [float("nan"), float("nan"), "lower"],
                            "verdict": ["best", "not distinguishable", "lower"],
                            "p_adjusted": [float("nan"), 0.2, 0.001]})
    report = SimpleNamespace(rank_by="opi_1", overall=overall)
    placed = ranking_of_report(report, {"SVM": "d", "kNN": "a", "Random": "c"})
    assert [(p.run_id, p.name, p.value, p.low, p.high, p.bound, p.verdict) for p in placed] == [
        ("d", "SVM", 0.4, 0.33, 0.45, None, "best"),  # NaN bound: a contender
        ("a", "kNN", 0.31, 0.27, 0.35, None, "not distinguishable"),
        ("c", "Random", 0.05, 0.01, 0.09, "lower", "lower")]
    assert [p.p_adjusted for p in placed][1:] == [0.2, 0.001]


# yardstick_clash and where_written


def test_children_measured_with_different_yardsticks_are_a_clash_said_once():
    same = [run("a", KNN, tags=yardstick("k1", "MiniLM")), run("b", BM25, tags=yardstick("k1", "MiniLM"))]
    assert yardstick_clash(same, "p1") is None
    assert yardstick_clash([*same[:1], run("b", BM25)], "p1") is None  # logged before yardsticks: left out
    clash = yardstick_clash([same[0], run("b", BM25, tags=yardstick("k2", "mpnet"))], "p1")
    assert clash.startswith("the runs of sweep p1 measure BERTSim with different yardsticks (metrics.similarity): "
                            "MiniLM (k1) in 1 run(s); mpnet (k2) in 1 run(s).")


def test_opi_report_says_the_parent_the_artifact_address_and_the_copy(tmp_path):
    parent = SimpleNamespace(info=SimpleNamespace(artifact_uri="file:///store/artifacts/p1/artifacts/",
                                                  experiment_id="3"))
    client = SimpleNamespace(get_run=lambda run_id: parent)
    said = where_written(client, "p1", None)
    assert said.startswith("report logged to the sweep's parent run p1 (experiment 3) at "
                           "file:///store/artifacts/p1/artifacts/report (report.html, report.md")
    assert said.endswith("report/)")
    assert where_written(client, "p1", tmp_path / "out").endswith(f"report/); copied to {tmp_path / 'out'}")


# with a store: shared settings, the runs view, a sweep that is not ranked


@pytest.fixture
def sweep(tmp_path):
    """A store, a parent run and a maker of its children (each started a second after the last)."""
    client = MlflowClient(empty_store(tmp_path))
    experiment_id = experiment(client, tmp_path)
    parent = client.create_run(experiment_id, tags={"opi.role": "sweep"}).info.run_id

    def child(name, metrics, params=None, tags=None, described=True):
        parts = dict(zip(("opi.retrieval", "opi.reader", "opi.classifier"), name.split(" | ")))
        all_tags = {"mlflow.parentRunId": parent, **({DESCRIPTION: name, **parts} if described else {}), **(tags or {})}
        run_id = client.create_run(experiment_id, start_time=1_000_000 + 1000 * len(made), run_name=name,
                                   tags=all_tags).info.run_id
        for key, value in metrics.items():
            client.log_metric(run_id, key, value)
        for key, value in (params or {}).items():
            client.log_param(run_id, key, value)
        made.append(run_id)
        return run_id

    made = []
    return client, parent, child


def test_only_the_settings_every_child_shares_become_the_parents_params(sweep):
    client, parent, child = sweep
    client.log_param(parent, "seed", "0")  # already there: not logged again
    child(KNN, {}, {"seed": "0", "retriever.k": "2", "dataset.name": "deeplogic"})
    child(KNN, {}, {"seed": "0", "retriever.k": "4", "dataset.name": "deeplogic"})
    log_shared_settings(client, parent, children(client, parent))
    assert client.get_run(parent).data.params == {"seed": "0", "dataset.name": "deeplogic"}
    log_shared_settings(client, parent, children(client, parent))  # twice: nothing changes, nothing refused
    assert client.get_run(parent).data.params == {"seed": "0", "dataset.name": "deeplogic"}


@pytest.mark.parametrize("metric, columns, ordered", [
    ("opi_1", ["opi_1", "opi_1_ci_low", "opi_1_ci_high", "bertsim", "lrcr"], True),
    ("opi_1_calibrated", ["opi_1_calibrated", "opi_1_calibrated_ci_low", "opi_1_calibrated_ci_high", "opi_1",
                          "bertsim", "lrcr"], True),
    ("bertsim", ["bertsim", "bertsim_ci_low", "bertsim_ci_high"], True),  # no gold relations: nothing else
    (None, ["opi_1", "bertsim", "lrcr"], False)])  # not ranked: in run order
def test_the_sweeps_runs_view_shows_its_children_best_first(sweep, metric, columns, ordered):
    client, parent, _ = sweep
    share_view(client, parent, metric)
    view = json.loads(client.get_experiment(client.get_run(parent).info.experiment_id).tags[VIEW_TAG + parent])
    assert view["searchFilter"] == f"tags.mlflow.parentRunId = '{parent}'" and view["runsHiddenMode"] == "SHOW_ALL"
    assert view["selectedColumns"] == [f"metrics.`{c}`" for c in columns]
    if ordered:
        assert (view["orderByKey"], view["orderByAsc"]) == (f"metrics.`{metric}`", False)
    else:
        assert "orderByKey" not in view and "orderByAsc" not in view


def test_a_sweep_of_different_yardsticks_is_summarised_in_run_order_and_not_ranked(sweep, tmp_path):
    client, parent, child = sweep
    first = child(KNN, {"opi_1": 0.2, "bertsim": 0.5}, tags=yardstick("k1", "MiniLM"))
    second = child(BM25, {"opi_1": 0.4, "bertsim": 0.6}, tags=yardstick("k2", "mpnet"))
    log_sweep_summary(client, parent)
    run = client.get_run(parent)
    assert run.data.tags["opi.ranked_by"] == "none: different yardsticks"
    assert run.data.tags[NOTE].startswith(f"**Not ranked**: the runs of sweep {parent} measure BERTSim with "
                                          "different yardsticks")
    assert run.data.metrics == {"configurations": 2.0}
    table = pd.read_csv(client.download_artifacts(parent, "comparison.csv", str(tmp_path)))
    assert list(table["configuration"]) == ["kNN", "BM25"]  # run order, though BM25's OPI-1 is higher
    assert NOTE not in client.get_run(first).data.tags and NOTE not in client.get_run(second).data.tags  # no places
    view = json.loads(client.get_experiment(run.info.experiment_id).tags[VIEW_TAG + parent])
    assert "orderByKey" not in view


def test_a_child_logged_before_the_description_tag_keeps_its_old_name_as_its_description(sweep):
    client, parent, child = sweep
    old = child(KNN, {"opi_1": 0.2}, described=False)
    child(BM25, {"opi_1": 0.3})
    log_sweep_summary(client, parent)
    found = client.get_run(old)
    assert found.data.tags[DESCRIPTION] == KNN and found.info.run_name == "kNN"
    assert found.data.tags[NOTE].startswith("2nd of 2 by OPI-1: ")
    assert client.get_run(parent).data.tags["opi.ranked_by"] == "opi_1"


def test_people_labels_rank_a_sweep_by_calibrated_opi(sweep):
    client, parent, child = sweep
    knn = child(KNN, {"opi_1": 0.5, "opi_1_calibrated": 0.1, "lrcr_calibrated": 0.3})  # as opi-label logs them
    bm25 = child(BM25, {"opi_1": 0.1, "opi_1_calibrated": 0.4, "lrcr_calibrated": 0.6})
    log_sweep_summary(client, parent)
    assert client.get_run(parent).data.tags["opi.ranked_by"] == "opi_1_calibrated"
    assert client.get_run(bm25).data.tags[NOTE].startswith("1st of 2 by calibrated OPI-1: ")
    assert client.get_run(knn).data.tags[NOTE].startswith("2nd of 2 by calibrated OPI-1: ")


def test_a_parent_without_children_is_left_as_it_is(sweep):
    client, parent, _ = sweep
    log_sweep_summary(client, parent)
    run = client.get_run(parent)
    assert run.data.metrics == {} and NOTE not in run.data.tags and "opi.ranked_by" not in run.data.tags
    assert client.list_artifacts(parent) == []


def test_the_report_refuses_children_of_different_yardsticks_before_any_download(sweep):
    client, parent, child = sweep
    child(KNN, {"opi_1": 0.2}, tags=yardstick("k1", "MiniLM"))
    child(BM25, {"opi_1": 0.4}, tags=yardstick("k2", "mpnet"))
    with pytest.raises(CommandError, match=f"the runs of sweep {parent} measure BERTSim with different yardsticks"):
        sweep_configurations(client, parent, ReportSettings(ReportConfig()))


def test_children_without_predictions_make_no_report(sweep):
    client, parent, child = sweep
    child(KNN, {"opi_1": 0.2})
    settings = ReportSettings(ReportConfig(), 2.0, 5)
    assert sweep_configurations(client, parent, settings) == ([], [], settings)


def test_the_report_s_cache_key_is_the_configurations_content_whatever_state_their_frames_are_in(tmp_path):
    from flows.tracking.sweep_report import content_key
    from opi.report import Configuration

    frame = pd.DataFrame({"id": ["a", "b"], "similarity": [0.5, 0.25], "chunk_ids": [[1, 2], [3]]})
    frame.to_parquet(tmp_path / "p.parquet")
    read = pd.read_parquet(tmp_path / "p.parquet")
    _ = read["similarity"].mean(), read.iloc[0]  # a frame that has been used
    assert content_key([Configuration("kNN", "single", "kNN", frame)]) == \
        content_key([Configuration("kNN", "single", "kNN", read)])
    changed = read.assign(similarity=[0.5, 0.26])
    assert content_key([Configuration("kNN", "single", "kNN", changed)]) != \
        content_key([Configuration("kNN", "single", "kNN", frame)])
