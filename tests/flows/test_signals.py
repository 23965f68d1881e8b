"""Signals as a terminal or a scheduler sends them, to the command's whole process group: Ctrl-C (SIGINT), a closed
terminal (SIGHUP), kill/a scheduler (SIGTERM). Each ends the sweep with 128 + its number, one line, no traceback,
the parent MLflow run KILLED and no process left (Prefect's temporary server lives in its own session, so the
signal does not cut the API from under the run)."""
import os
import signal

import mlflow
import pytest

from tests.helpers.cli import processes_with_env, start_cli, wait_for


@pytest.mark.parametrize("number, name", [
    pytest.param(signal.SIGINT, "Ctrl-C", marks=pytest.mark.slow),
    pytest.param(signal.SIGTERM, "SIGTERM", marks=pytest.mark.slow),
    pytest.param(signal.SIGHUP, "SIGHUP (the terminal closed)", marks=pytest.mark.slow)])
def test_a_signal_to_the_process_group_ends_the_sweep_cleanly(tmp_path, number, name):
    process, log = start_cli(tmp_path, "-m", "experiment=paper_grid")
    try:
        wait_for(lambda: "Launching 13 jobs" in log.read_text() or process.poll() is not None, 120,
                 "the sweep's first configuration")
        assert process.poll() is None, log.read_text()[-3000:]
        os.killpg(process.pid, number)  # as the terminal (or a scheduler) sends it: to the whole group
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    output = log.read_text()
    assert code == 128 + number, output[-3000:]
    assert output.strip().splitlines()[-1].endswith(
        f"stopped by {name}: finished stages and configurations are kept; the same command resumes"), output[-3000:]
    assert "Traceback" not in output and "Failed to reach API" not in output, output[-3000:]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (parent,) = client.search_runs([client.get_experiment_by_name("opi").experiment_id],
                                   "tags.`opi.role` = 'sweep'")
    assert parent.info.status == "KILLED"
    wait_for(lambda: not processes_with_env("PREFECT_HOME", str(tmp_path / "prefect")), 15, "no process left")
