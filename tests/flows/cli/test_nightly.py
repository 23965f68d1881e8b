"""opi-nightly end to end: a baseline it matches passes, a degraded configuration fails (message, tag, exit code),
and `serve` registers a cron deployment on a Prefect server."""
import os
import signal
import subprocess
import sys
import time

import mlflow
import pandas as pd
import pytest

from tests.helpers.cli import processes_with_env, run_cli
from tests.helpers.paths import ROOT as REPOSITORY

# two configurations on 26 bundled examples (2 per relation): small, but enough for the paired test to see a real drop
SET = ["hydra.sweeper.params.setup='knn,bm25'", "dataset=deeplogic-130", "dataset.sample=26",
       "classifier.folds=2", "report.enabled=false"]


def nightly(tmp_path, *args, expect=0):
    return run_cli("flows.cli.nightly", tmp_path, "run", *args, *SET, expect=expect)


def sweeps(tmp_path):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("opi").experiment_id
    return client, client.search_runs([experiment], "tags.`opi.role` = 'sweep'", order_by=["start_time ASC"])


@pytest.mark.slow
def test_nightly_passes_against_its_own_baseline_and_fails_a_degraded_retriever(tmp_path):
    first = nightly(tmp_path, "--promote")
    assert "no baseline yet" in first and "is now the nightly baseline" in first
    client, runs = sweeps(tmp_path)
    champion = runs[0].info.run_id
    assert runs[0].data.tags["opi.baseline"] == "champion"

    second = nightly(tmp_path)  # unchanged: every stage from the cache, identical numbers
    assert "no regression against run " + champion in second
    _, runs = sweeps(tmp_path)
    assert runs[1].data.tags["regression"] == "false"
    verdicts = pd.read_csv(client.download_artifacts(runs[1].info.run_id, "nightly/verdicts.csv", str(tmp_path)))
    assert len(verdicts) == 6 and set(verdicts["verdict"]) == {"ok"} and (verdicts["change"] == 0).all()

    # the reader answers from one sentence of one chunk: answers lose most of what they needed
    degraded = nightly(tmp_path, "--promote", "retriever.k=1", "llm.reader.n_sentences=1", expect=1)
    assert "regressed against the baseline (run " + champion in degraded
    assert "kNN | extractive | local-clf: bertsim fell" in degraded
    _, runs = sweeps(tmp_path)
    assert runs[2].data.tags["regression"] == "true"
    assert runs[0].data.tags["opi.baseline"] == "champion"  # a failing night never moves the baseline


@pytest.mark.slow
def test_a_baseline_that_is_not_a_sweep_stops_before_the_sweep_runs(tmp_path):
    output = run_cli("flows.cli.nightly", tmp_path, "run", "--baseline", "0123456789abcdef", *SET, expect=2)
    assert "cannot exist" in output or "is not in this MLflow store" in output
    assert "Launching" not in output  # nothing was evaluated


def healthy(api_url: str) -> bool:
    import urllib.request

    try:
        return urllib.request.urlopen(f"{api_url}/health", timeout=2).status == 200
    except OSError:
        return False


def test_serve_without_a_server_says_so(tmp_path):
    from tests.helpers.cli import free_port

    output = run_cli("flows.cli.nightly", tmp_path, "serve", env={"PREFECT_API_URL": f"http://127.0.0.1:{free_port()}/api"},
                     expect=2)
    assert "does not answer" in output and "prefect server start" in output


@pytest.mark.slow
def test_serve_registers_a_cron_deployment_on_the_prefect_server(tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from tests.helpers.cli import free_port

    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api"}
    started = []
    try:
        prefect = os.path.join(os.path.dirname(sys.executable), "prefect")
        started.append(subprocess.Popen([prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                        env=env, stdout=open(tmp_path / "server.log", "w"), stderr=subprocess.STDOUT,
                                        start_new_session=True))
        deadline = time.monotonic() + 120
        while not healthy(env["PREFECT_API_URL"]):
            assert started[0].poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.5)
        started.append(subprocess.Popen([sys.executable, "-m", "flows.cli.nightly", "serve", "--cron", "30 2 * * *",
                                         "dataset.limit=26"], env=env, stdout=open(tmp_path / "serve.log", "w"),
                                        stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path))
        deadline = time.monotonic() + 180
        while True:
            try:
                with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}):
                    with get_client(sync_client=True) as client:
                        deployment = client.read_deployment_by_name("opi-nightly/opi-nightly")
                break
            except Exception:
                for process in started:
                    assert process.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
                time.sleep(1)
        (schedule,) = deployment.schedules
        assert schedule.schedule.cron == "30 2 * * *" and schedule.schedule.timezone == "UTC"
        assert deployment.parameters["overrides"] == ["dataset.limit=26"]
        assert deployment.parameters["baseline"] == "champion"
    finally:
        for process in reversed(started):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
    assert not processes_with_env("PREFECT_HOME", str(tmp_path / "prefect"))


def test_prefect_yaml_deploys_the_nightly_flow():
    import inspect

    import yaml

    from flows.nightly.gate import nightly as nightly_flow

    root = REPOSITORY
    (deployment,) = yaml.safe_load((root / "prefect.yaml").read_text())["deployments"]
    path, name = deployment["entrypoint"].split(":")
    assert (root / path).exists() and name == nightly_flow.fn.__name__
    assert deployment["schedules"][0]["cron"] == "0 2 * * *"
    assert set(deployment["parameters"]) <= set(inspect.signature(nightly_flow.fn).parameters)
