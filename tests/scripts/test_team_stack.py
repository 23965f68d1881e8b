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
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (shutil.which("pg_ctl") or list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))),
    reason="PostgreSQL's server programs are not installed (apt-get install postgresql)")]


def stack(folder: Path, *arguments: str) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), *arguments, "--folder", str(folder)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


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
