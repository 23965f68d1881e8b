"""A race against the full grid it replaces, side by side in one run (issue #42).

    python benchmarks/race_grid.py [--grid readme|large] [--docs 260] [--llm-latency 0.2] [--concurrency 16]
                                   [--no-rerun] [--scores FILE] [-- overrides]

``readme``: the README grid (``experiment=paper_grid_bounds``); ``large``: the seven retrievers x ``retriever.k`` 2,
4, 8 x ``chunking`` small, paper (42 configurations), plus the six combinations (48), one sweep
(``experiment=retriever_grid``, a union of two grids). With ``--llm-latency``, the
reader and the relation classifier are an OpenAI-compatible endpoint answering after that many seconds
(``tests/helpers/fake_openai.py``; ``ClosestSentences``: its answer is the ``--answer-sentences`` (1) sentences handed
on that share the most words with the question, so configurations that retrieve better answer better, as with the
extractive reader);
without it, the default extractive reader and local classifier.

``--docs N``: on real text with more articles than the bundled set's 52 instead: the first N pages of 300-3,000 words
of the Python documentation (Debian's ``python3.11-doc``; ``benchmarks/real_corpus.py``), two questions each (a
seeded sentence asked about, the sentence the answer), no relation labels: the race metric is BERTSim with the
local classifier, which cannot label them, and OPI-1 with ``--llm-latency``, whose classifier labels the gold.

In new folders each (nothing shared): (1) the full grid; (2) the same grid with ``sweep.strategy=race``; (3) the
full grid again in the race's folder (what a race leaves reusable). Printed for each: wall time, example rows its
jobs wrote (configurations x examples, summed: for the race, its tracked runs', which are assembled from the rounds'
results and compute nothing; with Hydra's basic launcher its rounds run in the sweep's process and write none), the
rounds' own example evaluations (from ``race.json``), LLM calls that reached the endpoint; then whether the race's
survivors hold the full grid's best on the race metric (by the grid's own table, and by the average over articles
the race ranks by), and the race's costs as shares of the grid's.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.fake_openai import FakeOpenAI  # noqa: E402

BOUNDS = ("Random", "Oracle")

GRIDS = {"readme": ["experiment=paper_grid_bounds"],
         "large": ["experiment=retriever_grid"]}


class ClosestSentences(FakeOpenAI):
    """The fake endpoint answering with the ``SENTENCES`` retrieved sentences of the prompt that share the most words
    with the question, in the order handed on (an extractive answer, as the local reader's, so that configurations
    retrieving better answer better; with 2, the local reader's ``n_sentences``, handing on more sentences than the
    answer needs can cost it, as it does the local reader), and naming a relation from the question alone.
    ``FakeOpenAI`` names one from the whole prompt, evidence and answer included: a draw that differs between
    configurations, whose LRCR (1/13 by chance) then drowns their BERTSim in OPI, the race's metric, and no
    configuration is ever told apart."""

    SENTENCES = 1  # docs/performance.md section 11c measured 1

    @classmethod
    def reply_for(cls, body: dict) -> str:
        text = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
        question = re.search(r"(?m)^Question: (.+)$", text)
        if body.get("response_format"):
            properties = body["response_format"]["json_schema"]["schema"]["properties"]
            if "relation" in properties and question:  # FakeOpenAI's draw, from the question alone
                return FakeOpenAI.reply_for({**body, "messages": [{"role": "user", "content": question.group(1)}]})
            return FakeOpenAI.reply_for(body)
        sentences = re.findall(r"(?m)^- (.+)$", text)
        if not sentences:
            return text[:200]
        asked = set(words(question.group(1))) if question else set()
        overlap = [len(asked & set(words(sentence))) for sentence in sentences]
        closest = sorted(sorted(range(len(sentences)), key=lambda i: -overlap[i])[:cls.SENTENCES])
        return " ".join(sentences[i].strip()[:400] for i in closest)


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def opi_eval(folder: Path, arguments: list[str]) -> dict:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flows.cli.evaluate", *arguments], cwd=folder, capture_output=True,
                          text=True, env={**os.environ, "PREFECT_HOME": f"{folder}/prefect"})
    if done.returncode != 0:
        sys.exit(f"opi-eval exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return {"wall": time.perf_counter() - started, "log": done.stdout + done.stderr}


def children(folder: Path) -> list:
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlruns/mlflow.db")
    experiment = client.get_experiment_by_name("opi")
    return client.search_runs([experiment.experiment_id], "tags.`opi.role` = 'configuration'", max_results=5000)


def evaluations(folder: Path) -> int:
    """Example evaluations of every job of the sweep, from the jobs' metrics files (tracked or not)."""
    total = 0
    for path in folder.glob("multirun/**/predictions.parquet"):
        import pandas as pd

        total += len(pd.read_parquet(path, columns=["id"]))
    return total


def texts_embedded(folder: Path) -> dict[str, float]:
    """Texts each configuration run of the folder embedded (its ``texts_embedded``), by run id: articles' chunks for
    the dense retrievers, answers for BERTSim, shared by every configuration that needs them, computed once."""
    if not (folder / "mlruns" / "mlflow.db").exists():
        return {}
    return {run.info.run_id: run.data.metrics.get("texts_embedded", 0.0) for run in children(folder)}


def key_of(run) -> str:
    """A configuration across folders: its description, k and chunk size (run names depend on the sweep)."""
    params = run.data.params
    return (f"{run.data.tags.get('opi.description', run.info.run_name).split(' |')[0]} k={params.get('retriever.k')} "
            f"chunks={params.get('chunking.size')}")


def grid_best(folder: Path, metric: str, scores_file: Path | None = None) -> tuple[str, str]:
    """The full grid's best contender on ``metric``: by its table (MLflow metric) and by the average over
    articles (what the race ranks by), each as the job's overrides. ``scores_file``: each contender's score per
    article written there as JSON (to replay a race offline)."""
    import mlflow
    import pandas as pd

    from opi.racing import cluster_scores

    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlruns/mlflow.db")
    by_table, by_articles, per_article = {}, {}, {}
    for run in children(folder):
        name = key_of(run)
        if name.startswith(BOUNDS):
            continue
        by_table[name] = run.data.metrics.get(metric, float("nan"))
        with tempfile.TemporaryDirectory() as downloads:
            rows = pd.read_parquet(client.download_artifacts(run.info.run_id, "predictions.parquet", downloads))
        scores = cluster_scores(rows, metric)
        by_articles[name] = sum(scores.values()) / len(scores)
        per_article[name] = {str(article): float(score) for article, score in scores.items()}
    if scores_file:
        scores_file.write_text(json.dumps({"metric": metric, "scores": per_article}))
    return max(by_table, key=by_table.get), max(by_articles, key=by_articles.get)


def survivors(folder: Path) -> set[str]:
    return {key_of(run) for run in children(folder) if run.data.tags.get("opi.race.outcome") == "survivor"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", choices=["readme", "large"], default="readme")
    parser.add_argument("--llm-latency", type=float)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--answer-sentences", type=int, default=ClosestSentences.SENTENCES,
                        help="sentences in the fake endpoint's answer (2: as many as the local reader's)")
    parser.add_argument("--docs", type=int, help="articles of real text (the Python documentation) instead of the "
                        "bundled deeplogic-v2")
    parser.add_argument("--no-rerun", action="store_true", help="skip (3), the full grid again after the race")
    parser.add_argument("--scores", type=Path, help="write the grid's score per configuration and article there (JSON)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # grid_best downloads each run's rows
    ClosestSentences.SENTENCES = args.answer_sentences
    with ClosestSentences(latency=args.llm_latency or 0.0) as server, tempfile.TemporaryDirectory() as grid_dir, \
            tempfile.TemporaryDirectory() as race_dir, tempfile.TemporaryDirectory() as data_dir:
        if args.docs:
            from real_corpus import DOCS, corpus

            table = Path(data_dir) / "docs.csv"
            pages, total_words = corpus(DOCS, args.docs, table, questions=2, max_words=3000)
            print(f"data: {pages} pages of the Python documentation ({total_words:,} words), two questions each",
                  flush=True)
            args.overrides = ["dataset.kind=table", f"dataset.path={table}", *args.overrides]
        llm = ["llm=openai-compatible", f"llm.base_url={server.base_url}", "llm.model=fake", "llm.api_key_env=null",
               "classifier=llm", f"llm.concurrency={args.concurrency}"] if args.llm_latency is not None else []
        sweeps = [GRIDS[args.grid]]
        figures = {}
        phases = [("grid", Path(grid_dir), []), ("race", Path(race_dir), ["sweep.strategy=race"]),
                  *([] if args.no_rerun else [("grid after the race", Path(race_dir), [])])]
        for label, folder, extra in phases:
            calls_before, wall = len(server.arrivals), 0.0
            before, embedded_before = evaluations(folder), texts_embedded(folder)
            for sweep in sweeps:
                wall += opi_eval(folder, [*sweep, *llm, *extra, *args.overrides])["wall"]
            embedded = sum(v for run, v in texts_embedded(folder).items() if run not in embedded_before)
            if label == "race":  # its tracked runs embed nothing (put together from the rounds): the rounds' count
                embedded += sum(json.loads(p.read_text())["spent"]["texts_embedded"]
                                for p in folder.glob("multirun/**/race.json"))
            figures[label] = {"wall": wall, "calls": len(server.arrivals) - calls_before,
                              "evaluations": evaluations(folder) - before, "embedded": embedded}
            print(f"{label}: {wall:.1f} s, {figures[label]['evaluations']} example rows written, "
                  f"{figures[label]['calls']} LLM calls, {embedded:,.0f} texts embedded", flush=True)
            if label == "race":
                outcomes = [json.loads(p.read_text()) for p in folder.glob("multirun/**/race.json")]
                metric, kept = outcomes[0]["metric"], survivors(folder)
                rounds = sum(o["spent"]["examples"] for o in outcomes)
                print(f"  of which the rounds {rounds}: "
                      + "; ".join(f"stopped because {o['stopped']}" for o in outcomes), flush=True)
                for o in outcomes:  # each sweep raced on its own
                    print(f"  a race of {o['configurations']} configurations: its rounds {o['spent']['examples']} "
                          f"example evaluations of its grid's {o['grid_examples']} "
                          f"({o['spent']['examples'] / o['grid_examples']:.2f}), {len(o['survivors'])} left",
                          flush=True)
        table_best, article_best = grid_best(Path(grid_dir), metric, args.scores)
        grid, race = figures["grid"], figures["race"]
        print(f"race metric {metric}; the grid's best by its table: {table_best}; by the average over articles: "
              f"{article_best}; the race's survivors: {sorted(kept)}")
        print(f"survivors hold the grid's best: by the table {table_best in kept}, by articles {article_best in kept}")
        print(f"race / grid: example evaluations of the rounds {rounds / grid['evaluations']:.2f}, LLM calls "
              f"{race['calls'] / max(grid['calls'], 1):.2f}, wall {race['wall'] / grid['wall']:.2f}, texts embedded "
              f"{race['embedded'] / max(grid['embedded'], 1):.2f} (the articles a dense configuration still running "
              "needs, whichever configurations are dropped)")
        if "grid after the race" in figures:
            print(f"the grid after the race asked the endpoint {figures['grid after the race']['calls']} times of the "
                  f"grid's {grid['calls']}")


if __name__ == "__main__":
    main()
