"""Corpus scope on real, distinct text (issue #40): ``opi-eval retrieval.scope=corpus retriever=bm25`` over a corpus
of real documentation, BEFORE (a commit's tree, default the one before sentence spans were kept) and AFTER (the
working tree), side by side in one run:

- cold: new stage cache, new embedding store;
- store warm: new stage cache, the embedding store the cold run filled (every vector in it, 0 texts embedded): what
  a later command on the same articles meets with another sample, chunking, retriever or cache.

    apt-get install python3.11-doc      # the corpus: the Python documentation's reST sources (real prose, distinct)
    python benchmarks/real_corpus.py [--articles 300] [--before b3447d8] [--texts FOLDER]

The corpus: each documentation page of >= 300 words is an article (``--texts``: any folder of ``*.txt`` files
instead); one question per article (the first ``--articles``), a seeded sentence of it asked about, the sentence the
answer. Printed: wall, the run's ``seconds_chunking`` (segmenting and chunking) and ``seconds_total``, texts
embedded, and AFTER / BEFORE for each; the metrics of BEFORE and AFTER must be equal (checked).
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = Path("/usr/share/doc/python3.11/html/_sources")
BEFORE_COMMIT = "b3447d8"  # the last commit that segmented every article again in every command


def corpus(texts: Path, articles: int, out: Path, questions: int = 1, max_words: int | None = None
           ) -> tuple[int, int]:
    """A table of ``questions`` questions on each of the first ``articles`` pages of >= 300 (and <= ``max_words``)
    words: a seeded sentence of the page asked about ("What is said about <its first six words>?"), the sentence
    the answer."""
    import pandas as pd

    pattern = "*.rst.txt" if texts == DOCS else "*.txt"
    pages = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(texts.rglob(pattern))]
    pages = [page for page in pages if 300 <= len(page.split()) <= (max_words or len(page.split()))][:articles]
    if not pages:
        raise SystemExit(f"no text of >= 300 words under {texts} (apt-get install python3.11-doc, or --texts)")
    rng, rows = random.Random(0), []
    for page in pages:
        sentences = [s for s in re.split(r"(?<=[.?!])\s+", page) if 8 <= len(s.split()) <= 40] or [page[:300]]
        picked = [rng.choice(sentences)] if questions == 1 else rng.sample(sentences, min(questions, len(sentences)))
        asked = {}
        for sentence in (" ".join(s.split()) for s in picked):
            asked.setdefault(f"What is said about {' '.join(sentence.split()[:6])}?", sentence)
        rows += [{"context": page, "question": question, "answer": answer} for question, answer in asked.items()]
    pd.DataFrame(rows).to_csv(out, index=False)
    return len(pages), sum(len(page.split()) for page in pages)


def tree(commit: str, work: Path) -> Path:
    target = work / f"tree-{commit}"
    if not target.exists():
        target.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def run(source: Path, data: Path, cache: Path, home: Path) -> dict:
    """One command; ``home`` holds its MLflow store and Prefect's home, as a user's machine keeps them between
    commands (a new Prefect home costs its database's creation)."""
    import mlflow

    command = [sys.executable, "-m", "flows.cli.evaluate", "dataset.kind=table", f"dataset.path={data}",
               "retrieval.scope=corpus", "retriever=bm25", f"paths.cache_dir={cache}",
               f"tracking.tracking_uri=sqlite:///{home / 'mlflow.db'}", "tracking.experiment=real-corpus"]
    env = {**os.environ, "PYTHONPATH": str(source), "PREFECT_HOME": str(home / "prefect")}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    metrics = mlflow.search_runs(experiment_names=["real-corpus"], order_by=["start_time DESC"],
                                 max_results=1).iloc[0]
    return {"wall": wall, "chunking": metrics["metrics.seconds_chunking"],
            "total": metrics["metrics.seconds_total"], "embedded": metrics["metrics.texts_embedded"],
            "bertsim": metrics["metrics.bertsim"], "recall": metrics.get("metrics.evidence_recall_at_4")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--articles", type=int, default=300)
    parser.add_argument("--before", default=BEFORE_COMMIT)
    parser.add_argument("--texts", type=Path, default=DOCS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="opi-real-corpus-") as name:
        work = Path(name)
        data = work / "corpus.csv"
        pages, words = corpus(args.texts, args.articles, data)
        print(f"corpus: {pages} articles, {words:,} words, {pages} questions; load {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} cores")
        results = {}
        for label, source in (("before", tree(args.before, work)), ("after", ROOT)):
            cold, warm = work / label / "cold", work / label / "warm"
            results[label, "cold"] = run(source, data, cold / "cache", work / label)
            warm.mkdir(parents=True)
            for kept in (cold / "cache").glob("embeddings.sqlite*"):
                shutil.copy(kept, warm / kept.name)
            (warm / "cache").mkdir()
            for kept in warm.glob("embeddings.sqlite*"):
                kept.rename(warm / "cache" / kept.name)
            results[label, "store warm"] = run(source, data, warm / "cache", work / label)
    print(f"{'run':<22}{'wall s':>9}{'chunking s':>12}{'total s':>10}{'embedded':>10}{'BERTSim':>9}")
    for (label, kind), r in results.items():
        print(f"{label + ', ' + kind:<22}{r['wall']:>9.1f}{r['chunking']:>12.1f}{r['total']:>10.1f}"
              f"{r['embedded']:>10.0f}{r['bertsim']:>9.4f}")
    for kind in ("cold", "store warm"):
        before, after = results["before", kind], results["after", kind]
        print(f"{kind}: after / before wall {after['wall'] / before['wall']:.2f}, "
              f"chunking {after['chunking'] / before['chunking']:.2f}")
        if (before["bertsim"], before["recall"]) != (after["bertsim"], after["recall"]):
            raise SystemExit(f"{kind}: the metrics differ: before {before}, after {after}")


if __name__ == "__main__":
    main()
