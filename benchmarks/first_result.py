"""Time from the command's start to the first configuration's result line, and to the end, of a cold sweep.

    python benchmarks/first_result.py [--dataset deeplogic-130] [--experiment paper_grid] [--examples N]

Runs ``opi-eval`` in a fresh temporary folder and timestamps every output line as it arrives: the first line about
the data, the first configuration's result, the end. Two cold sweeps (empty stage cache), each in a new process:

- **first run**: nothing exists yet, as on a new machine: Prefect's home and the MLflow store are created, and
  their databases migrated, during the run;
- **stores exist**: Prefect's home and the MLflow store were made by an earlier run (one configuration on two
  examples, whose cache is then deleted), as for a user's next sweep on new data or new settings.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULT = re.compile(r"BERTSim \d\.\d+")


def timed_sweep(folder: Path, overrides: list[str]) -> tuple[float, float, float]:
    """(first line about the data, first result line, end) in seconds from the start."""
    command = [sys.executable, "-m", "flows.cli.evaluate", *overrides,
               f"tracking.tracking_uri=sqlite:///{folder}/mlflow.db", f"tracking.artifact_location={folder}/artifacts",
               f"paths.cache_dir={folder}/cache", f"hydra.sweep.dir={folder}/multirun",
               f"hydra.run.dir={folder}/outputs"]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=folder,
                               env={**os.environ, "PREFECT_HOME": f"{folder}/prefect", "PYTHONUNBUFFERED": "1"})
    data_line = first_result = None
    for line in process.stdout:
        now = time.perf_counter() - started
        if data_line is None and "rows read" in line:
            data_line = now
        if first_result is None and RESULT.search(line):
            first_result = now
    process.wait()
    assert process.returncode == 0, f"opi-eval exited {process.returncode}"
    return data_line, first_result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="deeplogic-130")
    parser.add_argument("--experiment", default="paper_grid")
    parser.add_argument("--examples", type=int, default=None)
    args = parser.parse_args()
    sweep = ["-m", f"experiment={args.experiment}", f"dataset={args.dataset}",
             *([f"dataset.limit={args.examples}"] if args.examples else [])]
    rows = {}
    with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as later:
        rows["first run"] = timed_sweep(Path(first), sweep)
        timed_sweep(Path(later), ["setup=dps", f"dataset={args.dataset}", "dataset.limit=2", "report.enabled=false"])
        shutil.rmtree(Path(later) / "cache")
        rows["stores exist"] = timed_sweep(Path(later), sweep)
    print(f"{args.experiment} on {args.dataset}{f' (first {args.examples})' if args.examples else ''}, cold cache:")
    print(f"  {'':14} {'data line':>10} {'first result':>13} {'whole sweep':>12}")
    for name, (data_line, first_result, total) in rows.items():
        print(f"  {name:14} {data_line:9.1f}s {first_result:12.1f}s {total:11.1f}s")


if __name__ == "__main__":
    main()
