"""The nightly gate's decisions on a store of ready-made sweeps: two overlapping runs promote once, and the
baseline commands (``promote``, ``export-baseline``) run from the command line."""
import json
import logging
import re
import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from flows.nightly import CHAMPION, gate  # imports Prefect, whose logging setup comes before the tests' log capture
from flows.nightly.baseline import Baseline, champion, load_baseline, promote
from flows.nightly.gate import (Night, Regression, comparable, decide, export_baseline, gate_settings, planned,
                                same_yardstick)
from flows.base.errors import CommandError
from opi.regression import GateSettings, read_baseline_file, value, write_baseline_file
from tests.flows.nightly.conftest import example_rows, nightly_cli, Store
from tests.helpers.mlflow_stores import empty_store


def test_two_overlapping_gated_runs_with_no_baseline_promote_exactly_once(store, tmp_path, monkeypatch, caplog):
    """Both runs start with no champion and sweep at once; the one that decides first promotes itself, the other
    finds the champion changed under it: it is judged against that run and does not move the baseline again."""
    plan = gate.planned([f"tracking.tracking_uri={store.uri}", f"paths.cache_dir={tmp_path}/cache"])
    yardstick = plan.yardstick
    monkeypatch.setattr(gate, "planned", lambda overrides: plan)
    both_swept = threading.Barrier(2, timeout=120)

    def sweep(overrides, label):  # each run's sweep ends only once the other's has started
        store.sweep({"kNN": example_rows(), "BM25": example_rows(shift=-0.002)}, label, yardstick)
        both_swept.wait()

    monkeypatch.setattr(gate, "run_sweep", sweep)
    results, errors = {}, []

    def night(i):
        try:
            results[i] = gate.gated_night([], "champion", True, GateSettings(permutations=999))
        except BaseException as err:  # noqa: BLE001 - said by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=night, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors and len(results) == 2, errors
    promoted = [r for r in results.values() if r["promoted"]]
    assert len(promoted) == 1
    first, = promoted
    assert first["baseline"] is None and store.tagged("opi.baseline", "champion") == [first["parent"]]
    other, = [r for r in results.values() if not r["promoted"]]
    assert other["baseline"] == f"run {first['parent']}" and other["regression"] is False
    tags = store.client.get_run(other["parent"]).data.tags
    assert tags["regression"] == "false" and tags["opi.baseline_source"] == f"run {first['parent']}"
    assert f"the baseline moved while this run ran (run {first['parent']} is now the champion)" in caplog.text


def test_a_baseline_file_is_judged_by_the_tolerance_and_the_gate_says_so(store, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="opi")
    plan = gate.planned([f"tracking.tracking_uri={store.uri}", f"paths.cache_dir={tmp_path}/cache"])
    frames = {"kNN | extractive | local-clf": example_rows(), "BM25 | extractive | local-clf": example_rows(shift=-0.05)}
    monkeypatch.setattr(gate, "planned", lambda overrides: plan)
    monkeypatch.setattr(gate, "run_sweep", lambda overrides, label: store.sweep(frames, label, plan.yardstick))
    numbers = {name: {"opi_1": value(f, "opi"), "bertsim": value(f, "bertsim"), "lrcr": value(f, "lrcr")}
               for name, f in frames.items()}
    path = write_baseline_file(tmp_path / "baseline.json", numbers, "a test", plan.yardstick)
    result = gate.gated_night([], str(path), False, GateSettings())
    assert result["regression"] is False and result["baseline"] == str(path)
    note = ("the baseline has numbers only (no per-example predictions): a change larger than the tolerance (0.01) "
            "decides each verdict, without a paired test")
    assert note in caplog.text
    text = Path(store.client.download_artifacts(result["parent"], "nightly/verdicts.md", str(tmp_path))).read_text()
    assert f"Baseline: {path}" in text and note[:1].upper() + note[1:] in text
    assert "| kNN " in text and "\\|" not in text  # short names: no bar to escape


@pytest.mark.slow
def test_promote_and_export_baseline_from_the_command_line(store, tmp_path):
    frames = {"kNN": example_rows(), "BM25": example_rows(shift=-0.05)}
    first, second = store.sweep(frames), store.sweep(frames)
    store_option = ["--tracking-uri", store.uri]
    assert f"run {first} is now the nightly baseline (was none)" in nightly_cli(tmp_path, "promote", first,
                                                                             *store_option)
    assert f"run {second} is now the nightly baseline (was {first})" in nightly_cli(tmp_path, "promote", second,
                                                                                 *store_option)
    assert store.tagged("opi.baseline", "champion") == [second]

    output = nightly_cli(tmp_path, "export-baseline", "--out", "baselines/nightly.json", *store_option)
    assert f"wrote baselines/nightly.json (the numbers of run {second})" in output
    assert read_baseline_file(tmp_path / "baselines" / "nightly.json") == {
        name: {"opi_1": value(rows, "opi"), "bertsim": value(rows, "bertsim"), "lrcr": value(rows, "lrcr")}
        for name, rows in frames.items()}

    child = store.client.search_runs([store.experiment_id], f"tags.mlflow.parentRunId = '{first}'")[0].info.run_id
    for arguments, message in [
            (["promote", "0123456789abcdef", *store_option], "run 0123456789abcdef is not in this MLflow store"),
            (["promote", child, *store_option], f"run {child} is not a sweep's parent run"),
            (["export-baseline", "--out", "b.json", "--sweep", child, *store_option],
             f"--sweep {child} is not a sweep's parent run"),
            (["promote", first, "--tracking-uri", f"sqlite:///{tmp_path}/none.db"], "no MLflow store at")]:
        output = nightly_cli(tmp_path, *arguments, expect=2)
        assert message in output and "Traceback" not in output, output
    assert store.tagged("opi.baseline", "champion") == [second]  # nothing moved


@pytest.mark.parametrize("command, described", [
    ("run", "judge every configuration x metric"), ("serve", "Register the opi-nightly deployment"),
    ("promote", "Make a sweep's parent run the nightly baseline"), ("export-baseline", "to a JSON baseline file")])
def test_every_subcommand_describes_itself(tmp_path, command, described):
    output = nightly_cli(tmp_path, command, "--help")
    assert described in " ".join(output.split()) and f"usage: opi-nightly {command}" in output


def test_bad_gate_settings_stop_before_anything_runs(tmp_path):
    output = nightly_cli(tmp_path, "run", "--tolerance", "-0.01", "dataset.limit=2", expect=2)
    assert output.strip().splitlines()[-1].endswith("opi-nightly: tolerance must be a finite number >= 0, got -0.01")
    assert "Launching" not in output
    output = nightly_cli(tmp_path, "serve", "--min-overlap", "1.5", expect=2)
    assert "opi-nightly: min_overlap must be a finite number in (0, 1], got 1.5" in output


def test_the_sweeps_output_is_passed_on_and_its_last_line_says_why_it_failed(tmp_path, capfd):
    from flows.nightly.sweep import followed

    script = ("import sys; print('[opi][INFO] - kNN: 7 of 7 stage results reused', flush=True); "
              "print('dataset problem: no examples left', file=sys.stderr); "
              "print('Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.'); sys.exit(2)")
    code, last = followed([sys.executable, "-c", script], dict(os.environ), tmp_path / "sweep.log")
    assert (code, last) == (2, "dataset problem: no examples left")
    assert "kNN: 7 of 7 stage results reused" in capfd.readouterr().out


def test_a_failed_sweep_is_said_by_its_error_not_by_the_detail_under_it():
    from flows.nightly.sweep import last_said

    hydra = ("[2026-12-07 10:00:00,000][HYDRA] Launching 2 jobs\nKey 'retriever.k' is not in struct\n"
             "    full_key: hydra.sweeper.params.retriever.k\n    object_type=dict\n")
    assert last_said(hydra) == "Key 'retriever.k' is not in struct"  # was "object_type=dict"
    logged = "[x][opi][ERROR] - dataset problem: d.csv, row 3: empty\n[x][opi][INFO] - stopped\n"
    assert last_said(logged) == "dataset problem: d.csv, row 3: empty" and last_said("") == "no output"


YARDSTICK = {"opi.yardstick": "k1", "opi.yardstick_model": "MiniLM"}


@pytest.fixture
def store(tmp_path):
    """The nightly conftest's store, on a copy of an already migrated database (fast)."""
    empty_store(tmp_path)
    return Store(tmp_path)


def numbers(frames):
    return {name: {"opi_1": value(f, "opi"), "bertsim": value(f, "bertsim"), "lrcr": value(f, "lrcr")}
            for name, f in frames.items()}


def night(store, parent, requested, promote_on_pass, started_with=None):
    return Night(store.client, store.experiment_id, parent, started_with, requested, GateSettings(), promote_on_pass,
                 YARDSTICK)


GOOD = {"kNN": example_rows(), "BM25": example_rows(shift=-0.002)}


@pytest.fixture
def baseline_file(tmp_path):
    """Tonight's good numbers as a committed baseline: the tolerance (0.01) decides each verdict."""
    path = write_baseline_file(tmp_path / "baseline.json", numbers(GOOD), "a test", YARDSTICK)
    return str(path), load_baseline(None, None, str(path))


# gate_settings and planned


def test_gate_settings_out_of_range_are_a_command_error():
    assert gate_settings(0.02, 0.1, 0.5, "example") == GateSettings(0.02, 0.1, 0.5, "example")
    with pytest.raises(CommandError, match=r"^opi-nightly: alpha must be a finite number in \(0, 1\), got 1.5$"):
        gate_settings(0.01, 1.5, 0.5, "example")
    with pytest.raises(CommandError, match="^opi-nightly: unit must be one of"):
        gate_settings(0.01, 0.05, 0.5, "galaxy")


def test_tonights_plan_leaves_the_sweep_settings_to_hydra(monkeypatch):
    composed = []
    monkeypatch.setattr(gate, "compose_config", lambda overrides: composed.append(overrides) or "cfg")
    plan = planned(["dataset.limit=3", "hydra.sweeper.params.x=1", "setup=knn", "hydra.job.chdir=true", "seed=2"])
    assert composed == [["experiment=nightly", "dataset.limit=3", "seed=2"]] and plan.cfg == "cfg"


def test_the_plan_reads_tracking_and_the_yardstick_from_the_same_overrides(tmp_path):
    plan = planned([f"tracking.tracking_uri=sqlite:///{tmp_path}/m.db", "tracking.experiment=nights"])
    assert plan.tracking.tracking_uri == f"sqlite:///{tmp_path}/m.db" and plan.tracking.experiment == "nights"
    assert plan.yardstick["opi.yardstick_model"] == "packaged:all-MiniLM-L6-v2"
    assert plan.yardstick["opi.yardstick"].startswith("sentence-transformers:")


@pytest.mark.parametrize("override, said", [
    ("nosuch=1", "invalid override for the nightly: Could not override 'nosuch'."),
    ("retriever.k=abc", "invalid override for the nightly: Error merging override retriever.k=abc: Value 'abc' of "
                        "type 'str' could not be converted to Integer"),
    ("dataset=nosuch", "invalid override for the nightly: In 'config': Could not find 'dataset/nosuch'"),
    ("retriever.k=2,8", "the nightly sweeps over several values with hydra.sweeper.params"),
])
def test_an_override_tonight_cannot_compose_from_is_one_line_before_anything(override, said):
    # was Hydra's traceback and exit 1, the code of a regression
    with pytest.raises(CommandError) as refused:
        planned([override])
    assert said in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("cron, timezone, said", [
    ("not a cron", "UTC", "--cron 'not a cron' --timezone 'UTC': Invalid cron string"),
    ("0 2 * * *", "Mars/Olympus", "--cron '0 2 * * *' --timezone 'Mars/Olympus': Invalid timezone"),
])
def test_a_schedule_prefect_would_refuse_when_due_is_refused_before_the_server_is_asked(cron, timezone, said,
                                                                                        monkeypatch):
    monkeypatch.setattr(gate, "user_api_url", lambda: pytest.fail("the server was asked first"))
    with pytest.raises(CommandError, match=re.escape(said)):
        gate.serve("opi-nightly", cron, timezone, {"overrides": []})


def test_data_tonight_cannot_read_is_a_command_error_before_the_sweep(monkeypatch):
    import flows.run.data

    def unreadable(config):
        raise ValueError("dataset.path does not exist")

    monkeypatch.setattr(flows.run.data, "load_data", unreadable)
    monkeypatch.setattr(gate, "typed", lambda cfg: cfg)
    with pytest.raises(CommandError, match="^invalid configuration: dataset.path does not exist$"):
        gate.Plan("cfg").example_ids()


# same_yardstick and comparable: before the sweep


def test_a_baseline_of_another_yardstick_is_refused():
    baseline = Baseline("run b1", {}, None, {"kNN": {"opi.yardstick": "k2", "opi.yardstick_model": "mpnet"}})
    with pytest.raises(CommandError, match=r"tonight's sweep and the baseline \(run b1\) measure BERTSim with "
                                           "different yardsticks"):
        same_yardstick(YARDSTICK, baseline)
    same_yardstick(YARDSTICK, Baseline("run b1", {}, None, {"kNN": YARDSTICK, "file": {}}))  # same, or untagged


def test_a_baseline_that_shares_too_few_examples_is_refused_and_a_partial_overlap_is_said(caplog):
    rows = {"kNN": example_rows(n=10)}  # e0..e9
    baseline = Baseline("run b1", {}, rows, {})

    def plan(ids):
        return SimpleNamespace(example_ids=lambda: set(ids))

    with pytest.raises(CommandError, match=r"^baseline run b1: tonight's run has 4 of the baseline's 10 examples "
                                           r"\(40%, tonight 4\), below min_overlap 50%"):
        comparable(baseline, plan(f"e{i}" for i in range(4)), GateSettings(min_overlap=0.5))
    with caplog.at_level(logging.INFO, logger="opi"):
        comparable(baseline, plan([*(f"e{i}" for i in range(6)), "x1"]), GateSettings(min_overlap=0.5))
    assert "comparing on the 6 examples both runs share (baseline 10, tonight 7)" in caplog.text


def test_a_file_of_numbers_needs_no_overlap_check():
    never = SimpleNamespace(example_ids=lambda: pytest.fail("a file has no examples to compare"))
    comparable(Baseline("b.json", {}, None, {}), never, GateSettings())


# decide


def test_the_first_night_without_promote_sets_no_champion(store, caplog):
    parent = store.sweep(GOOD)
    with caplog.at_level(logging.WARNING, logger="opi"):
        result = decide(night(store, parent, CHAMPION, False), None)
    assert result == {"parent": parent, "regression": None, "baseline": None, "promoted": False}
    assert store.client.get_run(parent).data.tags["regression"] == "unknown"
    assert champion(store.client, store.experiment_id) is None
    assert "no baseline yet (no run tagged opi.baseline=champion): nothing to compare with; run with --promote" \
        in caplog.text


def test_the_first_night_with_promote_becomes_the_champion(store):
    parent = store.sweep(GOOD)
    assert decide(night(store, parent, CHAMPION, True), None)["promoted"] is True
    assert store.tagged("opi.baseline", "champion") == [parent]


def test_a_regression_fails_the_night_names_what_fell_and_promotes_nothing(store, baseline_file, tmp_path):
    path, baseline = baseline_file
    parent = store.sweep({"kNN": example_rows(), "BM25": example_rows(shift=-0.05)})
    fell = value(example_rows(shift=-0.002), "bertsim") - value(example_rows(shift=-0.05), "bertsim")
    with pytest.raises(Regression) as failed:
        decide(night(store, parent, path, True), baseline)
    message = str(failed.value)
    assert message.startswith(f"nightly run {parent} regressed against the baseline ({path}):\n")
    assert f"BM25: bertsim fell {fell:.4f}" in message and "kNN:" not in message
    tags = store.client.get_run(parent).data.tags
    assert tags["regression"] == "true" and tags["opi.baseline_source"] == path
    assert {a.path for a in store.client.list_artifacts(parent, "nightly")} == {"nightly/verdicts.csv",
                                                                                 "nightly/verdicts.md"}
    assert champion(store.client, store.experiment_id) is None


def knn_sweep(store, ks):
    """kNN at each k of ``ks`` (its run named by its description alone, its settings as params) and BM25."""
    frames = {f"kNN @{k}": example_rows(shift=0.01 * int(k)) for k in ks}
    return store.sweep({**frames, "BM25": example_rows()},
                       params={f"kNN @{k}": {"retriever.k": k, "retriever.name": "knn"} for k in ks})


def judged_against_champion(store, before, tonight):
    promote(store.client, store.experiment_id, knn_sweep(store, before))
    parent = knn_sweep(store, tonight)
    return parent, lambda: decide(night(store, parent, CHAMPION, False),
                                  load_baseline(store.client, store.experiment_id, CHAMPION))


def test_a_configuration_added_beside_one_of_its_kind_leaves_that_one_matched_to_the_baseline(store, caplog):
    # tonight's kNN at k=4 beside a new kNN at k=8 is named "kNN [retriever.k=4]", the baseline's plain "kNN": it
    # was judged missing tonight, a false alarm
    parent, decided = judged_against_champion(store, ["4"], ["4", "8"])
    with caplog.at_level(logging.INFO, logger="opi"):
        assert decided()["regression"] is False
    verdicts = pd.read_csv(store.client.download_artifacts(parent, "nightly/verdicts.csv", str(store.folder)))
    assert {"kNN [retriever.k=4]", "kNN [retriever.k=8]", "BM25"} == set(verdicts["configuration"])
    assert "kNN [retriever.k=4] is the baseline's kNN" in caplog.text


def test_a_configuration_dropped_beside_one_of_its_kind_is_missing_and_the_other_still_judged(store):
    _, decided = judged_against_champion(store, ["2", "8"], ["2"])
    with pytest.raises(Regression) as failed:
        decided()
    fell = [line.split(":")[0] for line in str(failed.value).splitlines()[1:]]
    assert set(fell) == {"kNN [retriever.k=8]"}  # gone tonight; tonight's kNN is the baseline's k=2, judged alike


def test_a_deleted_champion_or_baseline_run_is_one_line_not_a_first_night(store):
    # the gate turned itself off: no champion found, so the night passed unjudged
    sweep = store.sweep(GOOD)
    promote(store.client, store.experiment_id, sweep)
    store.client.delete_run(sweep)
    with pytest.raises(CommandError, match=f"^the champion sweep {sweep} is deleted, so there is no baseline"):
        load_baseline(store.client, store.experiment_id, CHAMPION)
    with pytest.raises(CommandError, match=f"^baseline run {sweep} is deleted: restore it"):
        load_baseline(store.client, store.experiment_id, sweep)
    with pytest.raises(CommandError, match=f"^run {sweep} is deleted: restore it"):  # was MLflow's traceback
        gate.promote_by_hand(store.uri, "opi", sweep)


def test_a_night_that_passes_is_promoted_when_asked(store, baseline_file, caplog):
    path, baseline = baseline_file
    parent = store.sweep(GOOD)
    with caplog.at_level(logging.INFO, logger="opi"):
        result = decide(night(store, parent, path, True), baseline)
    assert result == {"parent": parent, "regression": False, "baseline": path, "promoted": True}
    assert store.client.get_run(parent).data.tags["regression"] == "false"
    assert store.tagged("opi.baseline", "champion") == [parent]
    said = next(r.getMessage() for r in caplog.records if "no regression against" in r.getMessage())
    assert re.fullmatch(rf"nightly run {parent}: no regression against {re.escape(str(path))} \(6 verdicts: "
                        r"\d+ [a-z ]+(, \d+ [a-z ]+)*\)", said), said  # 2 x 3 metrics, counted by verdict


def test_a_night_that_passes_without_promote_leaves_the_champion(store, baseline_file):
    path, baseline = baseline_file
    earlier = store.sweep(GOOD)
    promote(store.client, store.experiment_id, earlier)
    parent = store.sweep(GOOD)
    result = decide(night(store, parent, path, False, started_with=earlier), baseline)
    assert result["promoted"] is False and result["regression"] is False
    assert store.tagged("opi.baseline", "champion") == [earlier]


def test_a_pass_is_not_promoted_when_the_champion_moved_while_it_ran(store, baseline_file, caplog):
    """Judged against the file it asked for; but another night promoted meanwhile: that one stays champion."""
    path, baseline = baseline_file
    other = store.sweep(GOOD)
    promote(store.client, store.experiment_id, other)  # after this night started with no champion
    parent = store.sweep(GOOD)
    with caplog.at_level(logging.WARNING, logger="opi"):
        result = decide(night(store, parent, path, True, started_with=None), baseline)
    assert result == {"parent": parent, "regression": False, "baseline": path, "promoted": False}
    assert store.tagged("opi.baseline", "champion") == [other]
    assert f"run {parent} passed but is not promoted: the champion changed while it ran (now {other})" in caplog.text
    assert "judging against it" not in caplog.text  # a file was asked for: it is still what this night is judged by


# export_baseline


def test_the_champions_numbers_and_yardstick_are_exported(store, tmp_path, caplog):
    frames = {"kNN": example_rows(), "BM25": example_rows(shift=-0.05)}
    with pytest.raises(CommandError, match="^no champion run to export: pass --sweep <parent run id>$"):
        export_baseline(store.uri, "opi", None, tmp_path / "none.json")
    parent = store.sweep(frames, yardstick=YARDSTICK)
    promote(store.client, store.experiment_id, parent)
    with caplog.at_level(logging.INFO, logger="opi"):
        export_baseline(store.uri, "opi", None, tmp_path / "out" / "baseline.json")
    written = tmp_path / "out" / "baseline.json"
    assert read_baseline_file(written) == numbers(frames)
    data = json.loads(written.read_text())
    assert data["yardstick"] == YARDSTICK and data["source"] == f"mlflow run {parent}"
    assert f"wrote {written} (the numbers of run {parent})" in caplog.text
