"""Which of a sweep's verdicts change when inference is by article rather than by question.

    python benchmarks/verdicts_by_unit.py [--sweep <parent run id>] [--tracking-uri sqlite:///mlruns/mlflow.db]

Builds the sweep's report twice from its children's predictions, ``report.unit=example`` (each question its own
unit, as OPI did before) and ``report.unit=article``, and prints the article report's verdict, its design (unit,
clusters, questions), and every verdict that differs: each configuration against the best (the ranking metric),
the retrieval table's nDCG and MRR tests, and the per-relation strengths.
"""
from __future__ import annotations

import argparse
import dataclasses
import os

import pandas as pd


def reports(tracking_uri: str, sweep: str | None):
    from mlflow import MlflowClient

    from flows.tracking.sweep_report import sweep_configurations
    from flows.tracking.sweeps import find_sweep
    from opi.report import ReportSettings, build_report
    from opi.schemas import ReportConfig

    client = MlflowClient(tracking_uri)
    parent = find_sweep(client, "opi", sweep)
    configurations, relations, settings = sweep_configurations(client, parent, ReportSettings(ReportConfig()))
    return parent, {unit: build_report(configurations, relations, dataclasses.replace(
        settings, config=ReportConfig(unit=unit))) for unit in ("example", "article")}


def verdicts(report) -> pd.DataFrame:
    """One row per (table, configuration or relation, test): its verdict and adjusted p-value."""
    rows = [("overall", c, report.rank_by, v, p) for c, v, p in
            zip(report.overall["configuration"], report.overall["verdict"], report.overall["p_adjusted"])]
    if not report.retrieval.empty:
        for prefix in ("ndcg", "mrr"):
            rows += [("retrieval", c, prefix, v, p) for c, v, p in
                     zip(report.retrieval["configuration"], report.retrieval[f"{prefix}_verdict"],
                         report.retrieval[f"{prefix}_p_adjusted"]) if v is not None]
    if "verdict" in report.strengths:
        rows += [("strengths", r, f"{b} vs {u}", v, p) for r, b, u, v, p in
                 zip(report.strengths["relation"], report.strengths["best"], report.strengths["runner_up"],
                     report.strengths["verdict"], report.strengths["p_adjusted"]) if v is not None]
    frame = pd.DataFrame(rows, columns=["table", "subject", "test", "verdict", "p_adjusted"])
    frame = frame[frame["verdict"].notna()]  # untested rows (the oracle, S- combinations' rankings)
    frame["subject"] = frame["subject"].map(lambda name: report.labels.get(name, name))
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep")
    parser.add_argument("--tracking-uri", default="sqlite:///mlruns/mlflow.db")
    args = parser.parse_args()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    parent, built = reports(args.tracking_uri, args.sweep)
    article, example = built["article"], built["example"]
    print(f"sweep {parent}: {article.design.describe()}\n")
    print("\n".join(article.verdict()), "\n")
    both = verdicts(example).merge(verdicts(article), on=["table", "subject", "test"],
                                   suffixes=(" (by question)", " (by article)"))
    changed = both[both["verdict (by question)"] != both["verdict (by article)"]]
    print(f"{len(changed)} of {len(both)} verdicts differ:\n")
    print(changed.to_markdown(index=False, floatfmt=".3g") if len(changed) else "none")


if __name__ == "__main__":
    main()
