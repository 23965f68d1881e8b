"""Benchmark 4: scale. The synthetic RAG-Dataset-12000-shaped set (make_synthetic.py) at 1k, 4k and 12k rows through
retrieval (kNN), the extractive reader and the metrics (BERTSim, diagnostics), each size in a fresh process:
wall time, peak RSS, time per 1,000 rows, and wall time / pure embedding time of the run's distinct texts (the
same texts encoded again by a fresh model in the same process, batched, nothing else): on CPU the run is bound by
embedding, so this ratio is what the pipeline adds.

    python benchmarks/scale.py [--sizes 1000,4000,12000] [--device cpu] [--backend torch]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from flows.cli.start import start_command  # noqa: E402


def worker(data: str, rows: int, device: str, backend: str) -> dict:
    import numpy as np

    from opi.articles import prepare_articles
    from opi.combine import Single
    from opi.predictions import prediction_rows
    from opi.retrieval import combine, rank_examples, sentence_texts
    from opi.data import load_examples
    from opi.embeddings import PACKAGED_MINILM, SentenceEmbedder
    from opi.llm.reader import ExtractiveReader
    from opi.metrics.opi import bertsim, cosine_rows
    from opi.retrievers import KNNRetriever
    from opi.schemas import ChunkingConfig, DatasetConfig

    embedder = SentenceEmbedder(PACKAGED_MINILM, device=device, backend=backend)
    embedder.raw(["warm-up"])  # model load is not part of the pipeline's time
    started = time.perf_counter()
    examples, _ = load_examples(DatasetConfig(kind="table", path=data, limit=rows))
    chunking = ChunkingConfig()
    articles = prepare_articles([e.context for e in examples], chunking.size, chunking.overlap)
    rankings = rank_examples(KNNRetriever(embedder=embedder), examples, articles, 4)
    retrieved = combine(Single(), [rankings], examples, articles)
    texts = [sentence_texts(e, articles, retrieved[e.id]) for e in examples]
    answers = ExtractiveReader(n_sentences=2, embedder=embedder).answer([e.question for e in examples], texts)
    similarities = cosine_rows(embedder.encode([e.answer for e in examples], normalize=False),
                               embedder.encode(answers, normalize=False))
    rows_table = prediction_rows(examples, retrieved, texts, answers, ["unknown"] * len(examples), similarities,
                                 articles)
    score = bertsim(rows_table["similarity"].tolist())
    wall = time.perf_counter() - started
    distinct = [t for t in embedder._cache if t != "warm-up"]
    fresh = SentenceEmbedder(PACKAGED_MINILM, device=device, backend=backend)
    fresh.raw(["warm-up"])
    pure_started = time.perf_counter()
    fresh.raw(distinct)
    pure = time.perf_counter() - pure_started
    return {"rows": len(examples), "wall": wall, "pure_embedding": pure, "distinct_texts": len(distinct),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "bertsim": score,
            "support_recall": float(np.mean(rows_table["support_recall"]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,4000,12000")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.data, args.worker, args.device, args.backend)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        data = str(Path(folder) / "synthetic.parquet")
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_synthetic.py"), "--rows", str(max(sizes)),
                        "--out", data], check=True)
        results = []
        for size in sizes:
            out = subprocess.run([sys.executable, __file__, "--worker", str(size), "--data", data, "--device",
                                  args.device, "--backend", args.backend], check=True, capture_output=True, text=True)
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{'rows':>6} {'wall s':>8} {'s/1k rows':>10} {'distinct texts':>15} {'pure embed s':>13} "
          f"{'wall/embed':>11} {'peak RSS MB':>12}")
    for r in results:
        print(f"{r['rows']:>6} {r['wall']:>8.1f} {r['wall'] / r['rows'] * 1000:>10.2f} {r['distinct_texts']:>15} "
              f"{r['pure_embedding']:>13.1f} {r['wall'] / r['pure_embedding']:>11.2f} {r['peak_rss_mb']:>12.0f}")


if __name__ == "__main__":
    start_command()
    main()
