"""The parent run's comparison table: one row per child configuration (the paper's Table 2/4 shape)."""
from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pandas as pd

log = logging.getLogger("opi")
COLUMNS = ["bertsim", "lrcr", "opi_1", "opi_1_mean", "opi_2", "opi_0_5", "cache_hits", "seconds_total"]


def comparison_table(mlflow, parent_run_id: str) -> pd.DataFrame:
    runs = mlflow.search_runs(filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'",
                              search_all_experiments=True)
    if runs.empty:
        return pd.DataFrame()
    table = pd.DataFrame({"configuration": runs["tags.mlflow.runName"]})
    for column in COLUMNS:
        key = f"metrics.{column}"
        if key in runs:
            table[column] = runs[key].values
    return table.sort_values("opi_1", ascending=False).reset_index(drop=True)


def log_sweep_summary(mlflow, parent_run_id: str) -> None:
    table = comparison_table(mlflow, parent_run_id)
    if table.empty:
        return
    client = mlflow.MlflowClient()
    with tempfile.TemporaryDirectory() as folder:
        table.to_csv(Path(folder) / "comparison.csv", index=False)
        (Path(folder) / "comparison.txt").write_text(table.to_string(index=False, float_format="%.4f"))
        client.log_artifacts(parent_run_id, folder)
    client.log_metric(parent_run_id, "configurations", len(table))
    log.info("sweep of %d configurations, ranked by OPI-1:\n%s", len(table),
             table[["configuration", "bertsim", "lrcr", "opi_1"]].to_string(index=False, float_format="%.4f"))
