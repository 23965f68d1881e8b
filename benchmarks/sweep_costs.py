"""Benchmarks 2, 3 and 5 on the paper grid (bundled data, offline defaults), in a temporary folder:

2. cold vs warm re-run of the same sweep (and the embedding/LLM work the warm run did: should be none);
3. embedding work across the cold sweep: texts run through the model vs distinct texts (goal 1.00), and how many
   texts were asked for in all (what sharing saved);
5. orchestration overhead: the cold sweep through opi-eval (Hydra + Prefect + MLflow) vs the same stage functions
   called in a plain loop in one process, with the same stage sharing (report off in both).

    python benchmarks/sweep_costs.py [--dataset deeplogic-130] [--examples N]   # a bundled set (or its first N)
    python benchmarks/sweep_costs.py --rows 2400        # RAG-Dataset-12000's test-split size, synthetic rows
                                                        # with an article each (make_synthetic.py --distinct-articles)

The report is off in all of them (the plain loop builds none).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from flows.cli.start import start_command  # noqa: E402

SETUPS = "dps,knn,bm25,svm,tfidf,mmr,edi,a_seven,a_four,a_two,s_seven,s_four,s_two"


def dataset_overrides(folder: Path, dataset: str, limit: int | None, rows: int | None) -> list[str]:
    if rows is None:
        return [f"dataset={dataset}", *([f"dataset.limit={limit}"] if limit else [])]
    data = folder / f"synthetic-{rows}.parquet"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_synthetic.py"), "--rows", str(rows),
                    "--distinct-articles", "--out", str(data)], check=True)
    return ["dataset=table", f"dataset.path={data}", f"dataset.name=synthetic-{rows}"]


def sweep(folder: Path, data: list[str]) -> float:
    command = [sys.executable, "-m", "flows.cli.evaluate", "experiment=paper_grid", "report.enabled=false",
               f"tracking.tracking_uri=sqlite:///{folder}/mlflow.db", f"tracking.artifact_location={folder}/artifacts",
               f"paths.cache_dir={folder}/cache", f"paths.llm_cache={folder}/llm.sqlite",
               f"hydra.sweep.dir={folder}/multirun"] + data
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PREFECT_HOME": str(folder / "prefect")})
    return time.perf_counter() - started


def last_sweep_children(folder: Path) -> list:
    import mlflow

    from flows.tracking.sweeps import children, find_sweep

    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlflow.db")
    return children(client, find_sweep(client, "opi", None))


def plain_loop(data: list[str]) -> float:
    """``flows.run.stages.run_stages`` for each configuration in one process, its stage tasks called as plain
    functions (``task.fn``) with the same sharing of results (an in-memory memo in place of Prefect's cache): no
    Hydra jobs, no Prefect, no MLflow."""
    from prefect.utilities.hashing import hash_objects

    from flows.orchestration.cache import StageCalls
    from flows.run import stages
    from flows.run.config import compose_config, typed
    from flows.run.data import load_data
    from flows.run.preflight import prepared

    class PlainStageCalls(StageCalls):
        memo: dict = {}

        def call_many(self, stage, task_fn, *calls):
            results = []
            for args in calls:
                key = (task_fn.name, *(getattr(a, "content_hash", None) or hash_objects(a) for a in args))
                if key not in self.memo:
                    self.memo[key] = task_fn.fn(*args)
                results.append(self.memo[key])
            return results

    started = time.perf_counter()
    configs = [typed(compose_config([f"setup={s}", *data])) for s in SETUPS.split(",")]
    stages.StageCalls = PlainStageCalls
    for config in configs:
        config = prepared(config)
        stages.run_stages(config, load_data(config), None)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="deeplogic-130", help="a bundled set: deeplogic-130 or deeplogic-v2")
    parser.add_argument("--examples", type=int, default=None, help="the bundled set's first N examples")
    parser.add_argument("--rows", type=int, default=None, help="N synthetic rows with an article each instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        data = dataset_overrides(folder, args.dataset, args.examples, args.rows)
        cold = sweep(folder, data)
        cold_runs = last_sweep_children(folder)
        warm = sweep(folder, data)
        warm_runs = last_sweep_children(folder)
        plain = plain_loop(data)
    totals = max(cold_runs, key=lambda r: r.data.metrics["embedder_texts_embedded_total"]).data.metrics
    warm_embedded = sum(r.data.metrics["texts_embedded"] for r in warm_runs)
    warm_llm = sum(v for r in warm_runs for k, v in r.data.metrics.items() if k.endswith("http_requests"))
    dataset = f"{args.rows} synthetic rows, an article each" if args.rows else args.dataset
    print(f"paper grid, {len(cold_runs)} configurations, {dataset}, offline defaults, report off")
    print("2. cold vs warm")
    print(f"   cold {cold:7.1f} s   warm {warm:6.1f} s   ratio {cold / warm:.1f}x   "
          f"warm run: {warm_embedded:.0f} texts embedded, {warm_llm:.0f} LLM requests, "
          f"{sum(r.data.metrics['cache_hits'] for r in warm_runs):.0f} stage results reused")
    print("3. embedding work (cold sweep, one process)")
    embedded, unique = totals["embedder_texts_embedded_total"], totals["embedder_unique_texts"]
    print(f"   texts asked for {totals['embedder_texts_requested_total']:.0f}, run through the model "
          f"{embedded:.0f}, distinct {unique:.0f}: embedded / distinct = {embedded / unique:.2f}")
    print("5. orchestration overhead (cold)")
    print(f"   opi-eval {cold:7.1f} s   plain loop {plain:6.1f} s   "
          f"Hydra + Prefect + MLflow + process start: {(cold - plain) / cold:.0%} of the sweep")


if __name__ == "__main__":
    start_command()
    main()
