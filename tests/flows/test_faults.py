"""Faults outside the bad-input table (docs/reliability.md, "Faults, round two"): each is one line and exit 2
before any stage work, or leaves nothing behind: unreadable data shapes, stores that cannot be written, a full
disk, an unreachable Prefect API, a server orphaned by a killed run, two runs started in the same second."""
import errno
import json
import logging
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import mlflow
import pandas as pd
import pytest

from flows.base.errors import EXIT_USER_ERROR, run_or_explain
from flows.tracking.sweeps import sweep_incomplete
from opi.data import load_examples
from opi.schemas import DatasetConfig
from tests.helpers.cli import processes_with_env, run_cli
from tests.helpers.cli import free_port, prefect_home
from tests.helpers.cli import start_cli, wait_for

GOOD = load_examples(DatasetConfig(kind="bundled", name="deeplogic-130", limit=3))[0]
RECORDS = [{"id": e.id, "context": e.context, "question": e.question, "answer": e.answer, "relation": e.relation}
           for e in GOOD]


def one_line(output: str, expected: str) -> None:
    assert expected in output, output[-2500:]
    assert "Traceback" not in output, output[-3000:]
    assert sum("ERROR" in line for line in output.splitlines()) == 1, output[-2500:]


def write_case(tmp_path, case: str):
    if case == "a jsonl line that is not an object":
        path = tmp_path / "data.jsonl"
        path.write_text(json.dumps(RECORDS[0]) + "\n42\n")
        return path, "data.jsonl, line 2: expected a JSON object (one example per line), got int 42"
    if case == "a folder named like a data file":
        path = tmp_path / "x.jsonl"
        path.mkdir()
        return path, "x.jsonl: a folder, not a data file"
    if case == "a folder as dataset.path":
        return tmp_path, f"{tmp_path}: a folder, not a data file"
    if case == "a parquet file that is not parquet":
        path = tmp_path / "data.parquet"
        path.write_text("context,question\n")
        return path, "data.parquet: cannot be read as parquet"
    raise ValueError(case)


@pytest.mark.parametrize("case", ["a jsonl line that is not an object", "a folder named like a data file",
                                  "a folder as dataset.path", "a parquet file that is not parquet"])
def test_data_that_cannot_be_read_is_one_line(tmp_path, case):
    path, expected = write_case(tmp_path, case)
    output = run_cli("flows.cli.evaluate", tmp_path, "dataset=table", f"dataset.path={path}", expect=EXIT_USER_ERROR)
    one_line(output, expected)
    assert not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_a_parquet_evidence_list_column_is_read_item_by_item(tmp_path):
    frame = pd.DataFrame([{**r, "evidence": [r["answer"][:40], r["context"][:30]]} for r in RECORDS])
    frame.to_parquet(tmp_path / "data.parquet")
    output = run_cli("flows.cli.evaluate", tmp_path, "dataset=table", f"dataset.path={tmp_path}/data.parquet",
                     "report.enabled=false")
    assert "BERTSim" in output
    (run,) = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").search_runs(["1"])
    assert 0.0 <= run.data.metrics["evidence_recall"] <= 1.0 and run.data.metrics["n_examples"] == 3  # NaN fails


STORES = {"cache folder is a file": ("paths.cache_dir", "paths.cache_dir={}"),
          "tracking store under a file": ("tracking.tracking_uri", "tracking.tracking_uri=sqlite:///{}/mlflow.db"),
          "Prefect home under a file": ("PREFECT_HOME", None)}


@pytest.mark.parametrize("case", list(STORES))
def test_a_store_that_cannot_be_written_is_one_line_before_the_data_is_read(tmp_path, case):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a folder")
    where, override = STORES[case]
    overrides, env = ([override.format(blocker)], None) if override else ([], {"PREFECT_HOME": f"{blocker}/prefect"})
    output = run_cli("flows.cli.evaluate", tmp_path, "dataset.limit=2", *overrides, env=env, expect=EXIT_USER_ERROR)
    one_line(output, f"cannot write results: {where}: {blocker} is a file, not a folder")
    assert "rows read" not in output and "Warning" not in output


def test_a_full_disk_during_the_work_is_one_line_and_exit_2(caplog):
    def fill_the_disk():
        raise OSError(errno.ENOSPC, "No space left on device", "/data/.opi_cache/results/abc")

    with caplog.at_level(logging.ERROR, logger="opi"), pytest.raises(SystemExit) as stopped:
        run_or_explain(fill_the_disk)
    assert stopped.value.code == EXIT_USER_ERROR
    (message,) = [r.getMessage() for r in caplog.records]
    assert message.startswith("cannot write results: No space left on device (/data/.opi_cache/results/abc)")
    with pytest.raises(KeyError):  # anything else is a bug: its traceback is shown
        run_or_explain(lambda: {}["missing"])


def test_an_unreachable_prefect_api_is_one_line(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/api"
    output = run_cli("flows.cli.evaluate", tmp_path, "dataset.limit=2", env={"PREFECT_API_URL": url},
                     expect=EXIT_USER_ERROR)
    one_line(output, f"Prefect problem: Prefect's API at {url} (PREFECT_API_URL) does not answer")


def test_an_unknown_config_option_exits_2(tmp_path):
    output = run_cli("flows.cli.evaluate", tmp_path, "retriever=bm26", expect=EXIT_USER_ERROR)
    assert "Could not find 'retriever/bm26'" in output and "Traceback" not in output


@pytest.mark.slow
def test_a_killed_runs_prefect_server_ends_by_itself(tmp_path):
    home = str(tmp_path / "prefect")
    process, log = start_cli(tmp_path, "dataset.limit=2", "report.enabled=false")
    servers = lambda: [p for p in processes_with_env("PREFECT_HOME", home) if p != process.pid]  # noqa: E731
    wait_for(lambda: servers(), 120, "Prefect's temporary server")
    os.kill(process.pid, signal.SIGKILL)  # the command alone, as an out-of-memory kill would
    process.wait()
    wait_for(lambda: not servers(), 30, "the killed run's server to notice its run is gone and end")


@pytest.mark.slow
def test_the_next_run_stops_a_prefect_server_an_earlier_version_left_behind(tmp_path):
    # versions before the parent watch started `python -m prefect server start` directly; killed, their run left it
    # running, adopted by init: the shell below exits at once and leaves such a server
    home = str(prefect_home(tmp_path))
    subprocess.run(["sh", "-c", f"'{sys.executable}' -m prefect server start --host 127.0.0.1 --port {free_port()} "
                    ">/dev/null 2>&1 &"], env={**os.environ, "PREFECT_HOME": home}, check=True)
    wait_for(lambda: processes_with_env("PREFECT_HOME", home), 30, "the left-behind server")
    left = processes_with_env("PREFECT_HOME", home)
    output = run_cli("flows.cli.evaluate", tmp_path, "dataset.limit=2", "report.enabled=false")  # asserts no leftovers
    assert "stopped 1 Prefect server(s) left running by an earlier, killed run" in output
    assert not [pid for pid in left if os.path.exists(f"/proc/{pid}")]


@pytest.mark.slow
def test_two_runs_started_together_keep_separate_output_folders_and_both_log(tmp_path):
    started = [start_cli(tmp_path, "setup=knn", "dataset.limit=3", default_folders=True),
               start_cli(tmp_path, "setup=bm25", "dataset.limit=3", default_folders=True)]
    for process, log in started:
        assert process.wait(timeout=600) == 0, log.read_text()[-3000:]
    runs = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").search_runs(["1"])
    assert sorted(r.data.tags["opi.setup"] for r in runs) == ["BM25", "kNN"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert all(r.data.metrics["n_examples"] == 3 for r in runs)
    folders = sorted(p.parent.name for p in tmp_path.glob("outputs/*/*/predictions.parquet"))
    assert len(folders) == 2 and folders[0] != folders[1]
    assert not list(tmp_path.rglob("*.partial"))


def test_a_killed_sweep_is_reported_as_incomplete():
    killed = SimpleNamespace(info=SimpleNamespace(status="KILLED"),
                             data=SimpleNamespace(tags={"opi.planned_configurations": "13"}))
    assert sweep_incomplete(killed, 4) == ("it ended KILLED before it finished; 4 of 13 configurations have results "
                                           "and this report covers only those (run the same command again to "
                                           "finish it)")
    short = SimpleNamespace(info=SimpleNamespace(status="RUNNING"), data=killed.data)
    assert sweep_incomplete(short, 12) == "only 12 of 13 configurations have results; this report covers only those"
    whole = SimpleNamespace(info=SimpleNamespace(status="FINISHED"), data=killed.data)
    assert sweep_incomplete(whole, 13) is None


def test_credentials_in_the_llm_url_are_refused_and_reach_no_file_and_no_log_line(tmp_path):
    # (round three: refused, where round two ran the sweep with the URL redacted in every file)
    from tests.helpers.fake_openai import FakeOpenAI

    marker = "sk-opi-url-marker-4712"
    with FakeOpenAI() as server:
        url = server.base_url.replace("http://", f"http://opi-user:{marker}@") + f"?api-key={marker}"
        log = run_cli("flows.cli.evaluate", tmp_path, "-m", "setup=knn", "llm=openai-compatible", f"llm.base_url='{url}'",
                      "llm.model=fake", "dataset.limit=2", "report.enabled=false", env={"OPENAI_API_KEY": "k"},
                      expect=EXIT_USER_ERROR)
        assert not server.arrivals
    assert marker not in log and "llm.base_url holds credentials in its URL" in log
    leaks = [str(path) for path in tmp_path.rglob("*") if path.is_file() and marker.encode() in path.read_bytes()]
    assert leaks == []
