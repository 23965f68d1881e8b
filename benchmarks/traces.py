"""What per-example traces cost: the README's grid (``opi-eval experiment=paper_grid_bounds``, 15 configurations on
deeplogic-v2) cold and warm with ``tracking.traces=none``, the default and ``all``, side by side in one run.

    python benchmarks/traces.py [--modes none,13,all] [-- overrides]

Each mode runs in a new temporary folder with new stores (MLflow SQLite store, Prefect home, stage cache): a cold
run, then the same command again (warm: every configuration's result from the cache, its traces written anew).
Printed per mode and run: seconds, the added share against ``none``, the MLflow store's size, traces written /
expected (the runs' ``traces_written`` / ``traces_expected``), traces found in the store for those runs, failures
(``traces_failed``); then a markdown table.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme_grid import timed  # noqa: E402


def store_figures(folder: Path, since: int) -> dict[str, float]:
    """Traces written / expected / failed by the configuration runs started after ``since`` (ms), and the traces
    the store holds for them."""
    import mlflow

    uri = f"sqlite:///{folder}/mlruns/mlflow.db"
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("opi")
    runs = client.search_runs([experiment.experiment_id],
                              f"tags.`opi.role` = 'configuration' and attributes.start_time >= {since}")
    found = 0
    for run in runs:
        token = None
        while True:
            page = client.search_traces(locations=[experiment.experiment_id], run_id=run.info.run_id,
                                        include_spans=False, max_results=500, page_token=token)
            found += len(page)
            token = page.token
            if not token:
                break
    total = {name: sum(run.data.metrics.get(name, 0.0) for run in runs)
             for name in ("traces_written", "traces_expected", "traces_failed")}
    size = sum(p.stat().st_size for p in (folder / "mlruns").rglob("*") if p.is_file())
    return {**total, "runs": len(runs), "found": found, "store_mb": size / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="none,13,all", help="tracking.traces values, the first the reference")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    import time

    rows = []
    for mode in args.modes.split(","):
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            for phase in ("cold", "warm"):
                since = int(time.time() * 1000)
                seconds = timed(folder, [f"tracking.traces={mode}", *args.overrides], "flows.cli.evaluate")["total"]
                figures = store_figures(folder, since)
                rows.append({"mode": mode, "phase": phase, "seconds": seconds, **figures})
                print(f"traces={mode} {phase}: {seconds:.1f} s, store {figures['store_mb']:.1f} MB, traces "
                      f"{figures['traces_written']:.0f}/{figures['traces_expected']:.0f} written, "
                      f"{figures['found']} in the store, {figures['traces_failed']:.0f} failed", flush=True)
    reference = {row["phase"]: row["seconds"] for row in rows if row["mode"] == rows[0]["mode"]}
    print("\n| tracking.traces | run | seconds | added vs " + rows[0]["mode"] + " | MLflow store | traces written / "
          "expected | in the store | failed |\n|---|---|---|---|---|---|---|---|")
    for row in rows:
        added = row["seconds"] / reference[row["phase"]] - 1
        print(f"| {row['mode']} | {row['phase']} | {row['seconds']:.1f} | {added:+.0%} | {row['store_mb']:.1f} MB | "
              f"{row['traces_written']:.0f} / {row['traces_expected']:.0f} | {row['found']} | "
              f"{row['traces_failed']:.0f} |")


if __name__ == "__main__":
    main()
