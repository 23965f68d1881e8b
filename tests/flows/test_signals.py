"""Signals as a terminal or a scheduler sends them, to the command's whole process group: Ctrl-C (SIGINT), a closed
terminal (SIGHUP), kill/a scheduler (SIGTERM). Each ends the sweep with 128 + its number, one line, no traceback,
the parent MLflow run KILLED and no process left (Prefect's temporary server lives in its own session, so the
signal does not cut the API from under the run)."""
import os
import signal
import time

import mlflow
import pytest

from tests.helpers.cli import processes_with_env, start_cli, wait_for
from tests.helpers.fake_openai import FakeOpenAI


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



@pytest.mark.slow
def test_ctrl_c_while_a_races_configurations_wait_side_by_side_ends_it_within_seconds(tmp_path):
    # a round's configurations run in threads of the sweep's process, each waiting on a stalled endpoint
    with FakeOpenAI(mode="stall", stall_seconds=300) as server:
        process, log = start_cli(tmp_path, "-m", "setup=dps,knn,bm25", "sweep.strategy=race", "race.metric=bertsim",
                                 "llm=openai-compatible", f"llm.base_url={server.base_url}", "llm.model=fake",
                                 "llm.api_key_env=null", "dataset.limit=96", "race.rounds=4", "race.min_clusters=3",
                                 "classifier.folds=2")
        try:
            wait_for(lambda: len(server.arrivals) >= 3 or process.poll() is not None, 240, "the round's requests")
            assert process.poll() is None, log.read_text()[-3000:]
            started = time.monotonic()
            os.killpg(process.pid, signal.SIGINT)
            code = process.wait(timeout=60)
            took = time.monotonic() - started
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    output = log.read_text()
    assert code == 130 and took < 15, output[-3000:]
    assert output.strip().splitlines()[-1].endswith("stopped by Ctrl-C: finished stages and configurations are "
                                                    "kept; the same command resumes"), output[-3000:]
    assert "Traceback" not in output and "round 1/4" not in output, output[-3000:]
    wait_for(lambda: not processes_with_env("PREFECT_HOME", str(tmp_path / "prefect")), 15, "no process left")
