"""The README's first command (``opi-eval experiment=paper_grid_bounds``, 15 configurations on deeplogic-v2), timed
as a user meets it, and its numbers kept for before/after comparisons.

    python benchmarks/readme_grid.py [--repeat 3] [--metrics-out grid.json] [--compare before.json] [-- overrides]

Each repetition runs in a new temporary folder with new stores (MLflow store, Prefect home, stage cache): a
**cold** run, as on a new machine, then the same command again (**warm**: everything from the cache). Every output
line is timestamped as it arrives: the line saying what will run, the first configuration's result, the end.
Printed: each run's figures, then the spread (min-max) over the repetitions. ``--metrics-out`` writes every child
run's headline metrics (of the last cold run) as json; ``--compare`` says which of them differ from such a file.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULT = re.compile(r"BERTSim \d\.\d+")
KEPT = ("bertsim", "lrcr", "opi_1", "evidence_recall", "ndcg_at_4", "mrr", "answer_found", "support_recall")


def timed(folder: Path, overrides: list[str], module: str) -> dict[str, float]:
    command = [sys.executable, "-m", module, "experiment=paper_grid_bounds", *overrides]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=folder,
                               env={**os.environ, "PREFECT_HOME": f"{folder}/prefect", "PYTHONUNBUFFERED": "1"})
    figures: dict[str, float] = {}
    lines = []
    for line in process.stdout:
        lines.append(line)
        now = time.perf_counter() - started
        if "plan" not in figures and "configurations on" in line:
            figures["plan"] = now
        if "first_result" not in figures and RESULT.search(line):
            figures["first_result"] = now
    process.wait()
    if process.returncode != 0:
        sys.exit(f"opi-eval exited {process.returncode}:\n{''.join(lines[-40:])}")
    figures["total"] = time.perf_counter() - started
    return figures


def child_metrics(folder: Path) -> dict[str, dict[str, float]]:
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("opi")
    runs = client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'configuration'")
    return {run.data.tags.get("opi.setup", run.info.run_name): {k: run.data.metrics[k] for k in KEPT
                                                                 if k in run.data.metrics} for run in runs}


def spread(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f} s" if len(values) > 1 else f"{values[0]:.1f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--metrics-out", type=Path)
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--module", default="flows.cli.evaluate", help="the command's module (flows.evaluate for "
                        "checkouts from before issue #25)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    runs = []
    for number in range(args.repeat):
        with tempfile.TemporaryDirectory() as folder:
            cold = timed(Path(folder), args.overrides, args.module)
            warm = timed(Path(folder), args.overrides, args.module)
            runs.append((cold, warm))
            print(f"run {number + 1}: cold plan {cold['plan']:.1f} s, first result {cold['first_result']:.1f} s, "
                  f"whole {cold['total']:.1f} s; warm whole {warm['total']:.1f} s", flush=True)
            metrics = child_metrics(Path(folder))
    print(f"README grid ({len(metrics)} configurations), {args.repeat} run(s) in new folders:")
    print(f"  cold: line saying what will run {spread([c['plan'] for c, _ in runs])}, first result "
          f"{spread([c['first_result'] for c, _ in runs])}, whole sweep {spread([c['total'] for c, _ in runs])}")
    print(f"  warm: whole sweep {spread([w['total'] for _, w in runs])}")
    if args.metrics_out:
        args.metrics_out.write_text(json.dumps(metrics, indent=1, sort_keys=True))
    if args.compare:
        before = json.loads(args.compare.read_text())
        changed = {(setup, k): (before.get(setup, {}).get(k), v) for setup, values in metrics.items()
                   for k, v in values.items() if before.get(setup, {}).get(k) != v}
        missing = sorted(set(before) - set(metrics))
        print("metrics identical to", args.compare) if not changed and not missing else print(
            "differ from", args.compare, ":", changed, "missing:", missing)


if __name__ == "__main__":
    main()
