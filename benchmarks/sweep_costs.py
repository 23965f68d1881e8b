"""Benchmarks 2, 3 and 5 on the paper grid (bundled data, offline defaults), in a temporary folder:

2. cold vs warm re-run of the same sweep (and the embedding/LLM work the warm run did: should be none);
3. embedding work across the cold sweep: texts run through the model vs distinct texts (goal 1.00), and how many
   texts were asked for in all (what sharing saved);
5. orchestration overhead: the cold sweep through opi-eval (Hydra + Prefect + MLflow) vs the same stage functions
   called in a plain loop in one process, with the same stage sharing (report off in both).

    python benchmarks/sweep_costs.py [--examples N]
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


def sweep(folder: Path, limit: int | None) -> float:
    command = [sys.executable, "-m", "flows.evaluate", "experiment=paper_grid", "report.enabled=false",
               f"tracking.tracking_uri=sqlite:///{folder}/mlflow.db", f"tracking.artifact_location={folder}/artifacts",
               f"paths.cache_dir={folder}/cache", f"paths.llm_cache={folder}/llm.sqlite",
               f"hydra.sweep.dir={folder}/multirun"] + ([f"dataset.limit={limit}"] if limit else [])
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PREFECT_HOME": str(folder / "prefect")})
    return time.perf_counter() - started


def last_sweep_children(folder: Path) -> list:
    import mlflow

    from flows.report import children, find_sweep

    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlflow.db")
    return children(client, find_sweep(client, "opi", None))


def plain_loop(limit: int | None) -> float:
    """The stage functions of flows.evaluate.run_configuration, no Hydra/Prefect/MLflow, same sharing of results."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from flows import tasks
    from flows.evaluate import CONF_DIR, member_specs
    from opi import pipeline
    from opi.classify import Triple
    from opi.data import load_examples
    from opi.metrics.opi import summary
    from opi.metrics.stats import confidence_intervals
    from opi.relations import load_relation_set
    from opi.schemas import register_configs

    started = time.perf_counter()
    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        configs = [OmegaConf.to_container(compose("config", overrides=[f"setup={s}"]), resolve=True)
                   for s in SETUPS.split(",")]
    labels = load_relation_set().labels
    examples, _ = load_examples(kind="bundled", limit=limit)
    pool, _ = load_examples(kind="bundled")
    memo: dict = {}

    def once(key, fn, *args):
        if key not in memo:
            memo[key] = fn(*args)
        return memo[key]

    code = tasks.code_version()
    for cfg in configs:
        emb = cfg["embedding"]
        articles = once("articles", tasks.chunk_articles.fn, sorted({e.context for e in pool}), 100, 20, code)
        rankings = [once(("rank", repr(spec)), tasks.rank.fn, spec, examples, articles, emb, code)
                    for spec in member_specs(cfg)]
        c = cfg["combination"]
        retrieved = pipeline.combine(c["mode"], rankings, examples, articles, c["k"], c["c"], c["weights"])
        texts = [pipeline.sentence_texts(e, articles, retrieved[e.id]) for e in examples]
        answers = once(("answer", repr(texts)), tasks.answer.fn, cfg["llm"], [e.question for e in examples], texts,
                       emb, "", code)["answers"]
        pool_triples = [Triple(e.context, e.question, e.answer) for e in pool]
        apply = [Triple(" ".join(t), e.question, a) for e, t, a in zip(examples, texts, answers)]
        predicted = once(("classify", repr(apply)), tasks.classify.fn, cfg["classifier"], cfg["llm"],
                         [e.id for e in pool], pool_triples, [e.relation for e in pool], [e.id for e in examples],
                         apply, emb, "paper13", 0, "", code)["predicted"]
        once("accuracy", tasks.classifier_accuracy.fn, cfg["classifier"], [e.id for e in pool], pool_triples,
             [e.relation for e in pool], emb, 0, code)
        similarities = once(("similarity", repr(answers)), tasks.answer_similarity.fn, [e.answer for e in examples],
                            answers, emb, code)
        rows = pipeline.prediction_rows(examples, retrieved, texts, answers, predicted, similarities)
        summary(rows, labels)
        confidence_intervals(rows)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        cold = sweep(folder, args.examples)
        cold_runs = last_sweep_children(folder)
        warm = sweep(folder, args.examples)
        warm_runs = last_sweep_children(folder)
    totals = max(cold_runs, key=lambda r: r.data.metrics["embedder_texts_embedded_total"]).data.metrics
    warm_embedded = sum(r.data.metrics["texts_embedded"] for r in warm_runs)
    warm_llm = sum(v for r in warm_runs for k, v in r.data.metrics.items() if k.endswith("http_requests"))
    plain = plain_loop(args.examples)
    print(f"paper grid, {len(cold_runs)} configurations, offline defaults")
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
