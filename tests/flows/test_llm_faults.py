"""LLM-endpoint faults as a user meets them in ``opi-eval`` (the client's own handling is tested in
tests/opi/llm): each ends in one line and exit 2, and SIGTERM during a stalled request ends the run within seconds
with its parent run closed as KILLED."""
import signal
from pathlib import Path

import mlflow
import pytest

from tests.helpers.cli import processes_with_env, run_cli, start_cli, terminated, wait_for
from tests.helpers.fake_openai import FakeOpenAI


def opi_eval_faulty(tmp_path: Path, server: FakeOpenAI, *overrides: str, expect: int | None = 2) -> str:
    return run_cli("flows.cli.evaluate", tmp_path, "llm=openai-compatible", f"llm.base_url={server.base_url}",
                   "llm.model=fake", "llm.max_retries=1", "dataset.limit=2", "setup=knn", *overrides,
                   env={"OPENAI_API_KEY": "k"}, expect=expect)


# one fault end to end by default; the others (each handled by the client: tests/opi/llm) with the slow tests
@pytest.mark.parametrize("fault", ["429", *(pytest.param(f, marks=pytest.mark.slow)
                                           for f in ("500", "badjson", "html", "nochoices"))])
def test_opi_eval_ends_an_endpoint_fault_with_one_line_and_exit_2(tmp_path, fault):
    with FakeOpenAI(mode=fault, retry_after="0.1") as server:
        output = opi_eval_faulty(tmp_path, server)
    problems = [line for line in output.splitlines() if "LLM endpoint problem" in line]
    assert len(problems) == 1, output[-3000:]
    assert server.base_url in problems[0]
    assert "Traceback" not in output, output[-3000:]


@pytest.mark.slow
def test_sigterm_during_a_stalled_request_ends_opi_eval_within_10_s(tmp_path):
    with FakeOpenAI(mode="stall", stall_seconds=300) as server:
        process, log = start_cli(tmp_path, "-m", "llm=openai-compatible", f"llm.base_url={server.base_url}",
                                 "llm.model=fake", "dataset.limit=2", "setup=knn", env={"OPENAI_API_KEY": "k"})
        code, took = terminated(process, lambda: server.arrivals, 240, timeout=30)
    output = log.read_text()
    assert took < 10, output[-3000:]
    assert code == 128 + signal.SIGTERM, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    wait_for(lambda: not processes_with_env("PREFECT_HOME", str(tmp_path / "prefect")), 10, "its children to end")
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (parent,) = client.search_runs([client.get_experiment_by_name("opi").experiment_id])  # no child: none finished
    assert parent.data.tags["opi.role"] == "sweep" and parent.info.status == "KILLED"
