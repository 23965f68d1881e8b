"""Reliability: a sweep killed mid-run resumes without paying twice, two sweeps at once share a cache and a store
safely, and servers the tool starts listen on 127.0.0.1 only and stop on Ctrl-C."""
import os
import re
import signal
from pathlib import Path

import mlflow
import pytest

from opi.llm import local_server
from tests.helpers.cli import processes_with_env, run_cli, start_cli, wait_for
from tests.helpers.fake_openai import FakeOpenAI


def runs(folder: Path):
    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlflow.db")
    experiment = client.get_experiment_by_name("opi").experiment_id
    return client.search_runs([experiment], order_by=["attributes.start_time ASC"])


def configuration_metrics(folder: Path, parent: str) -> dict[str, dict[str, float]]:
    return {r.info.run_name: {k: v for k, v in r.data.metrics.items()
                              if k in ("bertsim", "lrcr", "opi_1", "opi_1_mean", "support_recall")}
            for r in runs(folder) if r.data.tags.get("mlflow.parentRunId") == parent}


@pytest.mark.slow
def test_a_killed_sweep_resumes_without_repeating_paid_calls_and_matches_an_uninterrupted_one(tmp_path):
    sweep = ["experiment=smoke", "dataset.limit=8", "llm=openai-compatible", "llm.model=fake",
             "llm.concurrency=1", "report.enabled=false"]
    # the fault-injecting server: a 500 and a 429 every 10 requests, retried by the client
    with FakeOpenAI(latency=0.5, faults={3: "500", 7: "429"}) as server:
        sweep.append(f"llm.base_url={server.base_url}")
        reference = tmp_path / "reference"
        reference.mkdir()
        run_cli("flows.cli.evaluate", reference, *sweep, env={"OPENAI_API_KEY": "k"})
        answered = {r["messages"][-1]["content"] for r in server.bodies}
        paid_uninterrupted = len(answered)  # distinct prompts; the faults add retries, not new prompts
        first_request = len(server.bodies)

        crashed = tmp_path / "crashed"
        crashed.mkdir()
        process, _ = start_cli(crashed, *sweep, env={"OPENAI_API_KEY": "k"})
        wait_for(lambda: len(server.bodies) - first_request >= paid_uninterrupted // 2, 240, "half of the calls")
        os.killpg(process.pid, signal.SIGKILL)  # the whole process group, as a crash of the machine would
        process.wait()
        before_resume = len(server.bodies)
        prompts_before = [r["messages"][-1]["content"] for r in server.bodies[first_request:before_resume]]

        output = run_cli("flows.cli.evaluate", crashed, *sweep, env={"OPENAI_API_KEY": "k"})
        prompts_after = [r["messages"][-1]["content"] for r in server.bodies[before_resume:]]
    repeated = set(prompts_before) & set(prompts_after)
    assert len(repeated) <= 1, repeated  # at most the one call in flight when the process died
    assert len(set(prompts_before) | set(prompts_after)) == paid_uninterrupted

    (reference_parent,) = [r.info.run_id for r in runs(reference) if r.data.tags.get("opi.role") == "sweep"]
    parents = [r for r in runs(crashed) if r.data.tags.get("opi.role") == "sweep"]
    assert [p.info.status for p in parents] == ["FAILED", "FINISHED"]  # the killed one is not left looking alive
    assert "ended without closing this run" in parents[0].data.tags["opi.orphaned"]
    client = mlflow.MlflowClient(f"sqlite:///{crashed}/mlflow.db")
    # (the kill comes after half the LLM calls, in the first configuration: its child run may not exist yet)
    for child in [r for r in runs(crashed) if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]:
        complete = {a.path for a in client.list_artifacts(child.info.run_id)} >= {"predictions.parquet",
                                                                                 "per_relation.csv"}
        assert child.info.status == ("FINISHED" if complete else "FAILED"), child.info
    assert configuration_metrics(crashed, parents[1].info.run_id) == configuration_metrics(reference,
                                                                                         reference_parent)
    assert "marked FAILED" in output
    assert not list(crashed.rglob(".*.partial"))


@pytest.mark.slow
def test_two_sweeps_at_once_share_the_cache_and_store(tmp_path):
    sweep = ["experiment=smoke", "dataset.limit=3", "report.enabled=false"]
    new_home = {"PREFECT_HOME": str(tmp_path / "new-prefect-home")}  # both servers boot on it: one at a time
    started = [start_cli(tmp_path, *sweep, "hydra.sweep.subdir=first-${hydra.job.num}", env=new_home),
               start_cli(tmp_path, *sweep, "hydra.sweep.subdir=second-${hydra.job.num}", env=new_home)]
    for process, log in started:
        assert process.wait(timeout=600) == 0, log.read_text()[-3000:]
    parents = [r for r in runs(tmp_path) if r.data.tags.get("opi.role") == "sweep"]
    assert len(parents) == 2 and {p.info.status for p in parents} == {"FINISHED"}
    first, second = (configuration_metrics(tmp_path, p.info.run_id) for p in parents)
    assert len(first) == 2 and first == second  # separate runs, same numbers
    children = [r for r in runs(tmp_path) if r.data.tags.get("opi.role") == "configuration"]
    # kNN's and BM25's 6 stages, computed once between the two sweeps (chunking and the classifier are shared)
    assert sum(r.data.metrics["cache_misses"] for r in children) <= 12
    again = run_cli("flows.cli.evaluate", tmp_path, *sweep)  # a third run reads every cached result back intact
    assert again.count("7 of 7 stage results reused") == 2
    assert not processes_with_env("PREFECT_HOME", new_home["PREFECT_HOME"])


def listening(port: int) -> list[str]:
    """Local addresses listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if int(hex_port, 16) == port and state == "0A":  # LISTEN
                found.append(address)
    return found


@pytest.mark.slow
@pytest.mark.skipif(not local_server.available(), reason="llm-local extra not installed")
@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGKILL])
def test_ctrl_c_or_kill_9_stops_the_local_llm_server_it_started(tmp_path, number):
    """Ctrl-C as a terminal sends it (to the process group): the run stops its server; kill -9 of the whole group
    leaves the server (in its own session) without its run: it ends by itself."""
    process, log = start_cli(tmp_path, "llm=local", "dataset.limit=26", "report.enabled=false")
    found = []

    def server_up():
        found[:] = re.findall(r"local LLM server \(\w+\) on http://127\.0\.0\.1:(\d+)/v1", log.read_text())
        return bool(found) and bool(listening(int(found[0])))
    wait_for(server_up, 300, "the local LLM server")
    port = int(found[0])
    assert set(listening(port)) <= {"0100007F"}, listening(port)  # 127.0.0.1 only
    os.killpg(process.pid, number)
    assert process.wait(timeout=120) == (130 if number == signal.SIGINT else -signal.SIGKILL)
    wait_for(lambda: not listening(port), 30, "the port to be free")
    wait_for(lambda: not processes_with_env("PREFECT_HOME", str(tmp_path / "prefect")), 30, "no process left")
