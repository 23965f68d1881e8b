"""What a command embedded, and what embedding it alone costs: the limit a cold run is measured against.

``embedded_texts(folder, overrides)``: the distinct texts a command run in ``folder`` (default stores) embedded with
the run's model: every candidate (the chunks and sentences of every article, every question and gold answer of the
data, every generated answer its runs logged) whose key is in the folder's embedding store. ``covered`` says how
many of the store's vectors that accounts for (all of them, or the limit is understated).

``pure_embedding(texts)``: those texts embedded in a new process by a new embedder, nothing else (the model loaded
first, not timed), with the same threads as OPI's: (wall seconds, CPU seconds).

    python benchmarks/embedded_texts.py FOLDER [-- overrides]   # prints both for a finished run in FOLDER
"""
from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Embedded:
    texts: list[str]
    stored: int  # vectors of the model in the store

    @property
    def covered(self) -> str:
        return f"{len(self.texts)} of the store's {self.stored} vectors"


def candidates(folder: Path, overrides: list[str]) -> set[str]:
    import mlflow
    import pandas as pd

    from flows.run.config import compose_config, typed
    from flows.run.data import load_data
    from opi.articles import prepare_articles

    config = typed(compose_config(overrides))
    data = load_data(config)
    texts = {e.question for e in data.pool} | {e.answer for e in data.pool}
    for size, overlap, length in {(config.chunking.size, config.chunking.overlap, config.chunking.length),
                                  *chunkings_logged(folder)}:
        for article in prepare_articles(list(data.contexts), size, overlap, length,
                                        config.sentences.language).values():
            texts |= {c.text for c in article.chunks} | {s.text for s in article.sentences}
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"
    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("opi")
    with tempfile.TemporaryDirectory() as downloads:
        for run in client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'configuration'"):
            rows = pd.read_parquet(client.download_artifacts(run.info.run_id, "predictions.parquet", downloads))
            texts |= {a for a in rows["generated_answer"] if isinstance(a, str)}
    return texts


def chunkings_logged(folder: Path) -> set[tuple[int, int, str]]:
    """The chunkings the folder's configuration runs used (a sweep may vary them)."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("opi")
    found = set()
    for run in client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'configuration'"):
        params = run.data.params
        if "chunking.size" in params:
            found.add((int(params["chunking.size"]), int(params["chunking.overlap"]),
                       params.get("chunking.length", "words")))
    return found


def embedded_texts(folder: Path, overrides: list[str] = (), store: Path | None = None) -> Embedded:
    """``store``: the run's embedding store (default: the default one, in ``folder``)."""
    from opi.embeddings.store import text_key

    with sqlite3.connect(store or folder / ".opi_cache" / "embeddings.sqlite") as db:
        (model,) = db.execute("SELECT model FROM vectors GROUP BY model ORDER BY COUNT(*) DESC LIMIT 1").fetchone()
        keys = {row[0] for row in db.execute("SELECT text FROM vectors WHERE model = ?", (model,))}
    texts = sorted(t for t in candidates(folder, list(overrides)) if text_key(t) in keys)
    return Embedded(texts, len(keys))


def _embed(path: str) -> None:
    """In a new process: embed the texts in ``path`` after loading the model; print (wall, CPU) seconds as json."""
    import time

    from opi.embeddings import SentenceEmbedder

    texts = json.loads(Path(path).read_text())
    embedder = SentenceEmbedder()
    embedder.raw(["load the model"])
    started, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    embedder.raw(texts)
    done = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps([time.perf_counter() - started,
                      done.ru_utime + done.ru_stime - cpu.ru_utime - cpu.ru_stime]))


def pure_embedding(texts: list[str]) -> tuple[float, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
        json.dump(texts, file)
        file.flush()
        done = subprocess.run([sys.executable, __file__, "--embed", file.name], capture_output=True, text=True,
                              check=True)
    wall, cpu = json.loads(done.stdout.strip().splitlines()[-1])
    return wall, cpu


if __name__ == "__main__":
    if sys.argv[1] == "--embed":
        _embed(sys.argv[2])
    else:
        found = embedded_texts(Path(sys.argv[1]), [a for a in sys.argv[2:] if a != "--"])
        wall, cpu = pure_embedding(found.texts)
        print(f"{found.covered}; embedding them alone: {wall:.1f} s wall, {cpu:.1f} CPU-seconds")
