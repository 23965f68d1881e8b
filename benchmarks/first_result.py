"""Time from the command's start to the first configuration's result line, and to the end, of a cold sweep.

    python benchmarks/first_result.py [--dataset deeplogic-130] [--experiment paper_grid] [--examples N]

Runs ``opi-eval`` in a fresh temporary folder (cold cache, fresh Prefect home) and timestamps every output line as
it arrives: the first line about the data, the first configuration's result, the end.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULT = re.compile(r"BERTSim \d\.\d+")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="deeplogic-130")
    parser.add_argument("--experiment", default="paper_grid")
    parser.add_argument("--examples", type=int, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "flows.evaluate", "-m", f"experiment={args.experiment}",
                   f"dataset={args.dataset}", *([f"dataset.limit={args.examples}"] if args.examples else []),
                   f"tracking.tracking_uri=sqlite:///{folder}/mlflow.db",
                   f"tracking.artifact_location={folder}/artifacts", f"paths.cache_dir={folder}/cache",
                   f"hydra.sweep.dir={folder}/multirun"]
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
                print(f"first result line: {line.strip()[:140]}")
        process.wait()
        total = time.perf_counter() - started
    assert process.returncode == 0, f"opi-eval exited {process.returncode}"
    print(f"{args.experiment} on {args.dataset}{f' (first {args.examples})' if args.examples else ''}, cold:")
    print(f"  first line about the data  {data_line:6.1f} s")
    print(f"  first configuration result {first_result:6.1f} s")
    print(f"  whole sweep                {total:6.1f} s")


if __name__ == "__main__":
    main()
