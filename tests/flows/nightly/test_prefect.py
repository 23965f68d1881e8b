"""The nightly as Prefect shows it, read from Prefect's API: under ``opi-nightly serve`` and under a worker (the
``prefect.yaml`` deployment), the nightly flow run holds OPI's log lines and its configurations as subflows, with
their parameters; a failed gate's state message names what fell."""
import json
import subprocess
import sys

import pytest

from tests.flows.nightly.servers import client_of, deployment, finished, prefect_server, started, stop
from tests.helpers.cli import cli_command, cli_environment, processes_with_env
from tests.helpers.paths import ROOT

# two configurations on 26 bundled examples, as tests/flows/cli/test_nightly.py
SET = ["hydra.sweeper.params.setup='knn,bm25'", "dataset=deeplogic-130", "dataset.sample=26", "classifier.folds=2",
       "report.enabled=false"]
DEGRADED = ["retriever.k=1", "llm.reader.n_sentences=1"]  # answers from one sentence: BERTSim falls


def stores(folder):
    """Every store under the test's folder, as the command-line tests' commands have them."""
    return cli_command("flows.cli.nightly", folder)[3:]


def tree(client, night):
    """The nightly's subflows and the log lines of the nightly and of each subflow."""
    from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterParentFlowRunId, LogFilter,
                                                LogFilterFlowRunId)

    subflows = client.read_flow_runs(flow_run_filter=FlowRunFilter(
        parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[night.id])))
    logs = {run.id: [(log.name, log.message) for log in client.read_logs(
        LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id])), limit=200)] for run in [night, *subflows]}
    return subflows, logs


def opi_lines(logs, run_id):
    return "\n".join(message for name, message in logs[run_id] if name == "opi")


def assert_configurations_are_subflows(subflows, logs):
    assert len(subflows) == 2 and all(run.state_name == "Completed" for run in subflows)
    for run in subflows:
        assert run.parameters["configuration"] == run.name  # parameters shown: the name and the settings
        assert run.parameters["settings"]["dataset.name"] == "deeplogic-130"
        assert f"{run.name}: " in opi_lines(logs, run.id) and "stage results reused" in opi_lines(logs, run.id)
    assert {run.parameters["settings"].get("retriever._target_", "").rsplit(".", 1)[-1] for run in subflows} == {
        "KNNRetriever", "BM25Retriever"}


@pytest.mark.slow
def test_a_nightly_under_serve_and_under_a_worker_is_one_tree_with_opi_log_lines(tmp_path):
    with prefect_server(tmp_path) as env:
        client = client_of(env)
        serve = started([sys.executable, "-m", "flows.cli.nightly", "serve", "--name", "served", "--cron",
                         "0 0 1 1 *", "--promote", *SET, *stores(tmp_path)], tmp_path, env, "serve")
        try:
            served = deployment(client, "opi-nightly/served", serve, tmp_path / "serve.log")
            night = finished(client, client.create_flow_run_from_deployment(served.id).id, watched=serve,
                             log=tmp_path / "serve.log")
        finally:
            stop(serve)
        assert night.state_name == "Completed", (tmp_path / "serve.log").read_text()[-3000:]
        assert night.parameters["promote_on_pass"] is True and night.parameters["unit"] == "article"
        subflows, logs = tree(client, night)
        assert_configurations_are_subflows(subflows, logs)
        lines = opi_lines(logs, night.id)
        assert "no baseline yet" in lines and "is now the nightly baseline (was none)" in lines
        assert "[2/2," in lines  # the sweep's own lines, outside the configurations' flow runs
        champion = lines.split(" is now the nightly baseline")[0].rsplit("run ", 1)[1]

        # a worker runs the prefect.yaml deployment: tonight's answers are worse, and the flow run says what fell
        worker_env = {**env, "OPI_REPO": str(ROOT)}
        subprocess.run([sys.executable, "-m", "prefect", "work-pool", "create", "opi", "--type", "process"],
                       env=worker_env, check=True, capture_output=True, timeout=120)
        subprocess.run([sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all"], env=worker_env, cwd=ROOT,
                       check=True, capture_output=True, timeout=120)
        deployed = client.read_deployment_by_name("opi-nightly/opi-nightly")
        run_id = client.create_flow_run_from_deployment(
            deployed.id, parameters={"overrides": [*SET, *DEGRADED, *stores(tmp_path)]}).id
        with open(tmp_path / "worker.log", "w") as log:
            subprocess.run([sys.executable, "-m", "prefect", "worker", "start", "--pool", "opi", "--run-once"],
                           env=worker_env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=log,
                           stderr=subprocess.STDOUT, timeout=300)
        night = finished(client, run_id, timeout=30, log=tmp_path / "worker.log")
        assert night.state_name == "Failed", (tmp_path / "worker.log").read_text()[-3000:]
        message = night.state.message
        assert f"regressed against the baseline (run {champion})" in message and " bertsim fell " in message
        subflows, logs = tree(client, night)
        assert_configurations_are_subflows(subflows, logs)
        assert "paired permutation tests by article" in opi_lines(logs, night.id)
        assert " bertsim fell " in opi_lines(logs, night.id)  # what fell, in the run's logs as in its state message
    assert not processes_with_env("PREFECT_HOME", env["PREFECT_HOME"])


CHILD = """
from flows.cli.start import start_command
start_command()
import logging
from prefect import flow
from flows.nightly.sweep import nightly_context

@flow(name="opi-evaluate")
def configuration(name: str) -> None:
    logging.getLogger("opi").info("inside %s", name)

with nightly_context():
    configuration("kNN")
    logging.getLogger("opi").info("between configurations")
"""
PARENT = """
import json, os, subprocess, sys
from flows.cli.start import start_command
start_command(early_prefect=True)
import cloudpickle
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId, LogFilter, LogFilterFlowRunId
from flows.nightly.sweep import CONTEXT_ENV, portable_context
from flows.orchestration.server import prefect_api, run_flow

@flow(name="opi-nightly-test")  # defined in __main__, as a worker's flow is in a module the sweep cannot import
def night():
    from prefect.runtime import flow_run

    path = sys.argv[1]
    with open(path, "wb") as file:
        file.write(cloudpickle.dumps(portable_context()))
    subprocess.run([sys.executable, "-c", sys.argv[2]], env={**os.environ, CONTEXT_ENV: path}, check=True)
    return flow_run.id

night_id = run_flow(night)
with prefect_api(), get_client(sync_client=True) as client:
    (sub,) = client.read_flow_runs(flow_run_filter=FlowRunFilter(
        parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[night_id])))
    logs = {name: [log.message for log in client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run])))
                   if log.name == "opi"] for name, run in (("night", night_id), ("sub", sub.id))}
    print(json.dumps({"sub": [sub.name, sub.parameters, sub.state_name], "logs": logs}))
"""


def test_a_flow_run_in_the_sweeps_process_is_a_subflow_of_the_nightly(tmp_path):
    """The nightly's context, handed to another process (``portable_context`` -> ``nightly_context``), makes the
    flow runs there subflows of the nightly, with their parameters, and sends OPI's lines to the right run's logs;
    also when the nightly flow lives in a module that process cannot import (a worker loads it from its file)."""
    result = subprocess.run([sys.executable, "-c", PARENT, str(tmp_path / "context.pickle"), CHILD],
                            capture_output=True, text=True, env=cli_environment(tmp_path), timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["sub"][1:] == [{"name": "kNN"}, "Completed"]
    assert found["logs"] == {"night": ["between configurations"], "sub": ["inside kNN"]}
