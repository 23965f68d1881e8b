"""The persistent embedding store across commands, and the cold path against its limit.

    python benchmarks/embedding_store.py [-- overrides]

In one new folder: (1) the README's grid (``experiment=paper_grid_bounds``) cold; (2) the same grid with
``chunking=small``; (3) the grid again after deleting the stage results (``paths.cache_dir``) but not the
embedding store (``paths.embedding_store``, kept outside it). For each command: texts computed by the model, texts
read from the store, the store's size, wall time. Then the limit of the cold path: the distinct texts the first
command embedded (chunks, sentences, questions, gold and generated answers), embedded alone by a new embedder in
this process, timed, beside the first command's time.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from embedded_texts import embedded_texts


def opi_eval(folder: Path, overrides: list[str]) -> float:
    command = [sys.executable, "-m", "flows.cli.evaluate", "experiment=paper_grid_bounds",
               f"paths.cache_dir={folder}/cache", f"paths.embedding_store={folder}/embeddings.sqlite", *overrides]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PREFECT_HOME": f"{folder}/prefect"})
    if done.returncode != 0:
        sys.exit(f"opi-eval exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return time.perf_counter() - started


def embedding_work(folder: Path, since: float) -> dict[str, float]:
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("opi")
    runs = [r for r in client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'configuration'")
            if r.info.start_time / 1000 >= since]
    return {"runs": len(runs), "computed": sum(r.data.metrics.get("texts_embedded", 0) for r in runs),
            "from_store": sum(r.data.metrics.get("texts_from_embedding_store", 0) for r in runs)}


def stored(folder: Path) -> int:
    with sqlite3.connect(folder / "embeddings.sqlite") as db:
        return db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report-out", type=Path, help="copy the first command's sweep report here")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        steps = [("README grid, cold", []), ("chunking=small", ["chunking=small"]),
                 ("README grid, stage results deleted", [])]
        seconds = []
        for number, (label, overrides) in enumerate(steps):
            if number == 2:
                shutil.rmtree(folder / "cache")
            since = time.time()
            seconds.append(opi_eval(folder, [*overrides, *args.overrides]))
            work = embedding_work(folder, since)
            print(f"{label}: {seconds[-1]:.1f} s, {work['runs']} runs; texts computed {work['computed']:.0f}, read "
                  f"from the store {work['from_store']:.0f}; store now holds {stored(folder)} vectors", flush=True)
            if number == 0:  # what the first command embedded, before the others add to the store
                texts = embedded_texts(folder, ["experiment=paper_grid_bounds", *args.overrides],
                                       folder / "embeddings.sqlite").texts
            if number == 0 and args.report_out:
                report = next(folder.glob("mlruns/artifacts/**/report/report.md")).parent
                shutil.copytree(report, args.report_out, dirs_exist_ok=True)
        from opi.embeddings import SentenceEmbedder

        embedder = SentenceEmbedder()
        embedder.raw(["warm-up: load the model"])
        started = time.perf_counter()
        embedder.raw(texts)
        pure = time.perf_counter() - started
        print(f"cold path: the README grid took {seconds[0]:.1f} s; embedding its {len(texts)} distinct texts alone "
              f"takes {pure:.1f} s (model loaded): {seconds[0] / pure:.2f}x")


if __name__ == "__main__":
    main()
