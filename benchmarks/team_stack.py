"""The README grid and traces on the team stack (``scripts/team_stack.py``: MLflow's server on PostgreSQL) against the
local SQLite store, side by side in one run (issue #41):

- the README grid (``experiment=paper_grid_bounds``, 15 configurations, default traces) cold, then warm, on each;
- the cost of a trace: one configuration (kNN, 416 examples) re-run from the cache with ``tracking.traces=all``
  and with ``none``; (all - none) / examples, on each;
- two sweeps started at once from two processes on the server (``setup=knn,bm25`` and ``setup=tfidf,dps``, one
  stage cache), against the same two one after the other.

    python benchmarks/team_stack.py [--skip-grid]

Each store starts empty in a new folder; every command has a Prefect home of its own kept across its commands.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def command(folder: Path, tracking: str, cache: Path, *overrides: str, env: dict | None = None,
            wait: bool = True):
    line = [sys.executable, "-m", "flows.cli.evaluate", *overrides, f"tracking.tracking_uri={tracking}",
            f"paths.cache_dir={cache}", f"hydra.sweep.dir={folder}/multirun-{time.monotonic_ns()}",
            f"hydra.run.dir={folder}/outputs-{time.monotonic_ns()}"]
    environment = {**os.environ, "PREFECT_HOME": str(folder / "prefect"), **(env or {})}
    log = open(folder / f"command-{time.monotonic_ns()}.log", "w")
    process = subprocess.Popen(line, cwd=folder, env=environment, stdout=log, stderr=subprocess.STDOUT)
    if not wait:
        return process
    started = time.perf_counter()
    if process.wait():
        raise SystemExit(f"{' '.join(line)} failed: see {log.name}")
    return time.perf_counter() - started


def trace_cost(folder: Path, tracking: str, cache: Path, env: dict | None) -> float:
    """Seconds a trace adds: one cached configuration with every example traced, against none."""
    single = ["setup=knn", "dataset=deeplogic-v2"]
    command(folder, tracking, cache, *single, "tracking.traces=none", env=env)  # the result cached
    none = min(command(folder, tracking, cache, *single, "tracking.traces=none", env=env) for _ in range(2))
    every = min(command(folder, tracking, cache, *single, "tracking.traces=all", env=env) for _ in range(2))
    return (every - none) / 416


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-grid", action="store_true")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="opi-team-bench-") as name:
        work = Path(name)
        stack = work / "stack"
        up = subprocess.run([sys.executable, str(ROOT / "scripts" / "team_stack.py"), "up", "--folder", str(stack)],
                            capture_output=True, text=True)
        if up.returncode:
            raise SystemExit(up.stdout + up.stderr)
        server = next(line.split("=", 1)[1] for line in up.stdout.split() if line.startswith("tracking.tracking_uri="))
        api = next(line.split("=", 1)[1] for line in up.stdout.split() if line.startswith("PREFECT_API_URL="))
        try:
            for label, tracking, env in (("SQLite", None, None), ("server", server, {"PREFECT_API_URL": api})):
                folder = work / label
                folder.mkdir()
                tracking = tracking or f"sqlite:///{folder}/mlflow.db"
                cache = folder / "cache"
                if not args.skip_grid:
                    results[label, "grid cold"] = command(folder, tracking, cache, "experiment=paper_grid_bounds",
                                                          env=env)
                    results[label, "grid warm"] = command(folder, tracking, cache, "experiment=paper_grid_bounds",
                                                          env=env)
                results[label, "per trace"] = trace_cost(folder, tracking, cache, env)
            folder = work / "concurrent"
            folder.mkdir()
            env = {"PREFECT_API_URL": api}
            sweeps = [["-m", "setup=knn,bm25", "dataset=deeplogic-v2"], ["-m", "setup=tfidf,dps", "dataset=deeplogic-v2"]]
            started = time.perf_counter()
            for sweep in sweeps:
                command(folder, server, folder / "cache-serial", *sweep, env=env)
            results["server", "two sweeps one after the other"] = time.perf_counter() - started
            started = time.perf_counter()
            running = [command(folder, server, folder / "cache-together", *sweep, env=env, wait=False)
                       for sweep in sweeps]
            codes = [process.wait() for process in running]
            results["server", "two sweeps at once"] = time.perf_counter() - started
            if any(codes):
                raise SystemExit(f"a concurrent sweep failed ({codes}): see {folder}")
        finally:
            subprocess.run([sys.executable, str(ROOT / "scripts" / "team_stack.py"), "down", "--purge", "--folder",
                            str(stack)], capture_output=True)
    print(f"load at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for (label, what), value in results.items():
        unit = f"{value * 1000:.0f} ms" if what == "per trace" else f"{value:.1f} s"
        print(f"{label:<8} {what:<32} {unit:>10}")


if __name__ == "__main__":
    main()
