"""Benchmarks 2, 3 and 5 on the paper grid (bundled data, offline defaults), in a temporary folder:

2. cold vs warm re-run of the same sweep (and the embedding/LLM work the warm run did: should be none);
3. embedding work across the cold sweep: texts run through the model vs distinct texts (goal 1.00), and how many
   texts were asked for in all (what sharing saved);
5. orchestration overhead: the cold sweep through opi-eval (Hydra + Prefect + MLflow) vs the same stage functions
   called in a plain loop in one process, with the same stage sharing (report off in both).

    python benchmarks/sweep_costs.py [--examples N]     # the bundled set (or its first N examples)
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
import flows  # noqa: E402,F401

SETUPS = "dps,knn,bm25,svm,tfidf,mmr,edi,a_seven,a_four,a_two,s_seven,s_four,s_two"


def dataset_overrides(folder: Path, limit: int | None, rows: int | None) -> list[str]:
    if rows is None:
        return [f"dataset.limit={limit}"] if limit else []
    data = folder / f"synthetic-{rows}.parquet"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "make_synthetic.py"), "--rows", str(rows),
                    "--distinct-articles", "--out", str(data)], check=True)
    return ["dataset=table", f"dataset.path={data}", f"dataset.name=synthetic-{rows}"]


def sweep(folder: Path, data: list[str]) -> float:
    command = [sys.executable, "-m", "flows.evaluate", "experiment=paper_grid", "report.enabled=false",
               f"tracking.tracking_uri=sqlite:///{folder}/mlflow.db", f"tracking.artifact_location={folder}/artifacts",
               f"paths.cache_dir={folder}/cache", f"paths.llm_cache={folder}/llm.sqlite",
               f"hydra.sweep.dir={folder}/multirun"] + data
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PREFECT_HOME": str(folder / "prefect")})
    return time.perf_counter() - started


def last_sweep_children(folder: Path) -> list:
    import mlflow

    from flows.report import children, find_sweep

    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlflow.db")
    return children(client, find_sweep(client, "opi", None))


def plain_loop(data: list[str]) -> float:
    """The stage functions of flows.evaluate.run_stages, no Hydra/Prefect/MLflow, same sharing of results."""
    from hydra import compose, initialize_config_dir

    from flows import tasks
    from flows.config import CONF_DIR, register_configs, typed
    from flows.evaluate import load_data
    from opi import pipeline
    from opi.metrics.configuration import configuration_metrics
    from opi.relations import Triple

    started = time.perf_counter()
    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        configs = [typed(compose("config", overrides=[f"setup={s}", *data])) for s in SETUPS.split(",")]
    memo: dict = {}

    def once(key, fn, *args):
        if key not in memo:
            memo[key] = fn(*args)
        return memo[key]

    code = tasks.code_version()
    for cfg in configs:
        d, emb = load_data(cfg), cfg.embedding
        examples, labels = d.examples, d.relation_set.labels
        articles = once("articles", tasks.chunk_articles.fn, d.contexts, 100, 20, code)
        rankings = [once(("rank", repr(r)), tasks.rank.fn, r, examples, articles, emb, code)
                    for r in cfg.members().values()]
        retrieved = pipeline.combine(cfg.combination, rankings, examples, articles)
        texts = [pipeline.sentence_texts(e, articles, retrieved[e.id]) for e in examples]
        answers = once(("answer", repr(texts)), tasks.answer.fn, cfg.llm, [e.question for e in examples], texts,
                       emb, "", code)["answers"]
        apply = [Triple(" ".join(t), e.question, a) for e, t, a in zip(examples, texts, answers)]
        predicted = once(("classify", repr(apply)), tasks.classify.fn, cfg.classifier, cfg.llm, d.pool_ids,
                         d.pool_triples, d.pool_labels, [e.id for e in examples], apply, emb, "paper13", 0, "",
                         code)["predicted"]
        once("accuracy", tasks.classifier_accuracy.fn, cfg.classifier, d.pool_ids, d.pool_triples, d.pool_labels,
             emb, 0, code)
        similarities = once(("similarity", repr(answers)), tasks.answer_similarity.fn, [e.answer for e in examples],
                            answers, emb, code)
        rows = pipeline.prediction_rows(examples, retrieved, texts, answers, predicted, similarities)
        configuration_metrics(rows, labels, cfg.metrics.betas, cfg.metrics.beta)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=None, help="the bundled set's first N examples")
    parser.add_argument("--rows", type=int, default=None, help="N synthetic rows with an article each instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        data = dataset_overrides(folder, args.examples, args.rows)
        cold = sweep(folder, data)
        cold_runs = last_sweep_children(folder)
        warm = sweep(folder, data)
        warm_runs = last_sweep_children(folder)
        plain = plain_loop(data)
    totals = max(cold_runs, key=lambda r: r.data.metrics["embedder_texts_embedded_total"]).data.metrics
    warm_embedded = sum(r.data.metrics["texts_embedded"] for r in warm_runs)
    warm_llm = sum(v for r in warm_runs for k, v in r.data.metrics.items() if k.endswith("http_requests"))
    dataset = f"{args.rows} synthetic rows, an article each" if args.rows else "bundled set"
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
    main()
