"""scripts/team_stack.py: the team stack brought up from nothing (PostgreSQL, an MLflow server on it, a Prefect
server with a process work pool and worker); a sweep with traces logged to it; the nightly deployed with
`prefect deploy` and run by the worker; everything checked through the servers' APIs; then down, nothing left."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "team_stack.py"
needs_postgres = pytest.mark.skipif(
    not (shutil.which("pg_ctl") or list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))),
    reason="PostgreSQL's server programs are not installed (apt-get install postgresql)")


def stack(folder: Path, *arguments: str, expect: int = 0) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), *arguments, "--folder", str(folder)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == expect, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout + done.stderr


def test_a_stack_already_up_is_left_running_and_down_with_nothing_up_says_so(tmp_path):
    folder = tmp_path / "stack"
    folder.mkdir()
    keeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # a stack's state naming a live process: `up` again must not stop it
        (folder / "stack.json").write_text(json.dumps({"pids": [keeper.pid], "host": "127.0.0.1"}))
        said = stack(folder, "up", expect=1)
        assert f"a stack is already running from {folder}: `down` first" in said
        assert keeper.poll() is None and (folder / "stack.json").exists()
    finally:
        keeper.kill()
        keeper.wait()
    (folder / "stack.json").unlink()
    assert stack(folder, "down").strip() == f"no team stack was running from {folder}"
    assert stack(folder, "down", "--purge").strip() == f"no team stack was running from {folder}; its folder deleted"
    assert not folder.exists()


def test_a_host_it_cannot_listen_on_is_one_line_before_anything_is_made(tmp_path):
    said = stack(tmp_path / "stack", "up", "--host", "192.0.2.1", expect=1)  # TEST-NET-1: never this machine's
    assert said.strip() == "cannot listen on --host 192.0.2.1: Cannot assign requested address"
    assert not (tmp_path / "stack").exists()


def running(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def descendants(pids: list[int]) -> list[int]:
    """Every live process whose ancestry includes one of ``pids`` (the servers' workers), and ``pids``."""
    parents = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                parents[int(proc.name)] = int((proc / "stat").read_text().split(")")[-1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found = set(pids)
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                grew = True
    return running(sorted(found))


@pytest.mark.slow
@needs_postgres
def test_the_team_stack_runs_a_sweep_with_traces_and_the_nightly_through_its_worker_then_leaves_nothing(tmp_path):
    import mlflow
    from mlflow import MlflowClient

    folder = tmp_path / "stack"
    output = stack(folder, "up")
    state = json.loads((folder / "stack.json").read_text())
    settings = state["settings"]
    processes = descendants(state["pids"])
    postmaster = int((Path(state["postgres_data"]) / "postmaster.pid").read_text().split()[0])
    try:
        assert f"tracking.tracking_uri={settings['tracking.tracking_uri']}" in output
        assert json.loads(stack(folder, "status"))["running"] is True
        assert "already running" in stack(folder, "up", expect=1)
        assert json.loads(stack(folder, "status"))["running"] is True  # a second `up` left it up
        env = {**os.environ, "PREFECT_API_URL": settings["PREFECT_API_URL"],
               "PREFECT_HOME": str(tmp_path / "prefect-client")}
        common = [f"tracking.tracking_uri={settings['tracking.tracking_uri']}",
                  f"paths.cache_dir={settings['paths.cache_dir']}", "dataset=deeplogic-130", "dataset.limit=20"]
        sweep = subprocess.run([sys.executable, "-m", "flows.cli.evaluate", "-m", "setup=knn,bm25", *common,
                                "tracking.traces=all", f"hydra.sweep.dir={tmp_path}/multirun"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=900)
        assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]

        mlflow.set_tracking_uri(settings["tracking.tracking_uri"])
        client = MlflowClient()
        runs = mlflow.search_runs(experiment_names=["opi"])
        children = runs[runs["tags.opi.role"] == "configuration"]
        assert sorted(children["tags.mlflow.runName"]) == ["BM25", "kNN"]
        for _, run in children.iterrows():
            assert 0 < run["metrics.bertsim"] <= 1 and run["metrics.traces_written"] == 20
            assert {a.path for a in client.list_artifacts(run["run_id"])} >= {"predictions.parquet", "metrics.json"}
            assert run["artifact_uri"].startswith("mlflow-artifacts:")  # served by the stack, to every machine
            assert list((folder / "artifacts").rglob(f"{run['run_id']}/artifacts/predictions.parquet"))
            traces = client.search_traces(locations=[run["experiment_id"]], run_id=run["run_id"], max_results=100)
            assert len(traces) == 20
        # the nightly, deployed from prefect.yaml and run by the stack's worker
        deploy = subprocess.run([sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=300)
        assert deploy.returncode == 0, deploy.stdout[-2000:] + deploy.stderr[-2000:]
        overrides = [*common, "hydra.sweeper.params.setup='knn,bm25'", f"hydra.sweep.dir={tmp_path}/nightly"]
        night = subprocess.run([sys.executable, "-m", "prefect", "deployment", "run", "opi-nightly/opi-nightly",
                                "--params", json.dumps({"overrides": overrides, "promote_on_pass": True}), "--watch"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert night.returncode == 0 and "Completed" in night.stdout, night.stdout[-3000:] + night.stderr[-2000:]
        sweeps = mlflow.search_runs(experiment_names=["opi"], filter_string="tags.`opi.role` = 'sweep'")
        assert len(sweeps) == 2 and (sweeps["tags.opi.baseline"] == "champion").sum() == 1  # the night promoted
    finally:
        stack(folder, "down", "--purge")
    assert json.loads(stack(folder, "status"))["running"] is False
    assert running([*processes, postmaster]) == [] and not Path(state["postgres_data"]).exists()
