"""The README's first command (``opi-eval experiment=paper_grid_bounds``, 15 configurations on deeplogic-v2), timed
as a user meets it, and its numbers kept for before/after comparisons.

    python benchmarks/readme_grid.py [--repeat 3] [--metrics-out grid.json] [--compare before.json] [-- overrides]

Each repetition runs in a new temporary folder with new stores (MLflow store, Prefect home, stage cache): a
**cold** run, as on a new machine, then the same command again (**warm**: everything from the cache). Every output
line is timestamped as it arrives: the line saying what will run, the first configuration's result, the end.
Printed: each run's figures, then the spread (min-max) over the repetitions. ``--metrics-out`` writes every child
run's headline metrics (of the last cold run) as json; ``--compare`` says which of them differ from such a file.

Each repetition also runs the warm grid with ``tracking.traces=none``, and measures the limit of the cold run: the
distinct texts it embedded, embedded alone in a new process with the same threads (``embedded_texts.py``); and for
the first configuration, the same for what it alone embeds (``setup=<first>`` cold in another new folder). Printed
as the issue's ratios (#40): warm / cold, cold / its pure embedding, CPU use of the cold run (CPU-seconds of the
command and every process it started / wall), first result / the first configuration's pure embedding.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from embedded_texts import embedded_texts, pure_embedding

RESULT = re.compile(r"BERTSim \d\.\d+")
KEPT = ("bertsim", "lrcr", "opi_1", "evidence_recall", "ndcg_at_4", "mrr", "answer_found", "support_recall")


def timed(folder: Path, overrides: list[str], module: str) -> dict[str, float]:
    command = [sys.executable, "-m", module, "experiment=paper_grid_bounds", *overrides]
    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
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
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command and what it started and waited for
    figures["cpu"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
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


def ratios(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"


def first_setup(overrides: list[str]) -> str:
    """The setup the grid runs first (its sweep's first value)."""
    from hydra import compose, initialize_config_dir

    from flows.run.config import CONF_DIR, register_configs

    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        config = compose("config", overrides=["experiment=paper_grid_bounds", *overrides], return_hydra_config=True)
    return str(config.hydra.sweeper.params.setup).split(",")[0].strip()


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
        with tempfile.TemporaryDirectory() as folder, tempfile.TemporaryDirectory() as alone:
            cold = timed(Path(folder), args.overrides, args.module)
            warm = timed(Path(folder), args.overrides, args.module)
            untraced = timed(Path(folder), [*args.overrides, "tracking.traces=none"], args.module)
            metrics = child_metrics(Path(folder))
            grid = embedded_texts(Path(folder), ["experiment=paper_grid_bounds", *args.overrides])
            cold["embedding"], cold["embedding_cpu"] = pure_embedding(grid.texts)
            first = first_setup(args.overrides)
            subprocess.run([sys.executable, "-m", args.module, f"setup={first}", *args.overrides], cwd=alone,
                           env={**os.environ, "PREFECT_HOME": f"{alone}/prefect"}, check=True, capture_output=True)
            own = embedded_texts(Path(alone), [f"setup={first}", *args.overrides])
            cold["first_embedding"], _ = pure_embedding(own.texts)
            runs.append((cold, warm, untraced))
            print(f"run {number + 1}: cold plan {cold['plan']:.1f} s, first result {cold['first_result']:.1f} s, "
                  f"whole {cold['total']:.1f} s at {cold['cpu'] / cold['total']:.0%} CPU; warm whole "
                  f"{warm['total']:.1f} s, without traces {untraced['total']:.1f} s; the grid's {grid.covered} "
                  f"embedded alone {cold['embedding']:.1f} s ({cold['embedding_cpu']:.1f} CPU-s); {first}'s "
                  f"{own.covered} alone {cold['first_embedding']:.1f} s", flush=True)
    print(f"README grid ({len(metrics)} configurations), {args.repeat} run(s) in new folders, load at the end "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores:")
    print(f"  cold: line saying what will run {spread([c['plan'] for c, _, _ in runs])}, first result "
          f"{spread([c['first_result'] for c, _, _ in runs])}, whole sweep {spread([c['total'] for c, _, _ in runs])}")
    print(f"  warm: whole sweep {spread([w['total'] for _, w, _ in runs])}, without traces "
          f"{spread([u['total'] for _, _, u in runs])}")
    print("  ratios (issue #40's targets in brackets):")
    print(f"    warm / cold, default traces {ratios([w['total'] / c['total'] for c, w, _ in runs])} [<= 0.12]; "
          f"without traces {ratios([u['total'] / c['total'] for c, _, u in runs])} [<= 0.10]")
    print(f"    cold / pure embedding of its distinct texts {ratios([c['total'] / c['embedding'] for c, _, _ in runs])}"
          f" [<= 1.3]; CPU use over the cold run {ratios([c['cpu'] / c['total'] * 100 for c, _, _ in runs])} % "
          f"[>= 180 %]")
    print(f"    first result / its configuration's pure embedding "
          f"{ratios([c['first_result'] / c['first_embedding'] for c, _, _ in runs])} [<= 1.3]")
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
