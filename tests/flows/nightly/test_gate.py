"""The nightly gate's decisions on a store of ready-made sweeps: two overlapping runs promote once, and the
baseline commands (``promote``, ``export-baseline``) run from the command line."""
import logging
import os
import sys
import threading
from pathlib import Path

import pytest

from flows.nightly import gate  # imports Prefect, whose logging setup comes before the tests' log capture
from opi.regression import GateSettings, read_baseline_file, value, write_baseline_file
from tests.flows.nightly.conftest import example_rows, nightly_cli


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
