"""A nightly's MLflow store without running a sweep: sweeps made of given per-example rows, as ``opi-eval`` logs
them (a parent run tagged ``opi.role=sweep`` and its label; one child run per configuration with its metrics, its
yardstick tags and ``predictions.parquet``)."""
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from opi.regression import value
from tests.helpers.cli import cli_environment


def example_rows(n: int = 48, shift: float = 0.0, per_article: int = 6) -> pd.DataFrame:
    relation = np.array(["deductive", "fuzzy"] * (n // 2))
    similarity = np.clip(np.linspace(0.3, 0.9, n) + shift, 0, 1)
    return pd.DataFrame({"id": [f"e{i}" for i in range(n)], "relation": relation,
                         "cluster": [f"a{i // per_article}" for i in range(n)],
                         "predicted_relation": np.where(np.arange(n) % 3 == 0, relation, "unknown"),
                         "similarity": similarity})


class Store:
    def __init__(self, folder: Path):
        self.folder = folder
        self.uri = f"sqlite:///{folder}/mlflow.db"
        self.client = mlflow.MlflowClient(self.uri)
        found = self.client.get_experiment_by_name("opi")
        self.experiment_id = found.experiment_id if found else self.client.create_experiment(
            "opi", artifact_location=(folder / "artifacts").resolve().as_uri())

    def sweep(self, frames: dict[str, pd.DataFrame], label: str = "", yardstick: dict | None = None,
              params: dict[str, dict[str, str]] | None = None) -> str:
        """A finished sweep of ``frames`` (configuration name -> rows; ``params``: name -> its settings, where its
        run name is its description and several share one); its parent run id."""
        client = self.client
        parent = client.create_run(self.experiment_id, run_name="sweep",
                                   tags={"opi.role": "sweep", **({"opi.label": label} if label else {})}).info.run_id
        for name, rows in frames.items():
            child = client.create_run(self.experiment_id, run_name=name.split(" @")[0],
                                      tags={"mlflow.parentRunId": parent, **(yardstick or {})}).info.run_id
            for key, setting in (params or {}).get(name, {}).items():
                client.log_param(child, key, setting)
            for metric, key in (("opi_1", "opi"), ("bertsim", "bertsim"), ("lrcr", "lrcr")):
                client.log_metric(child, metric, value(rows, key))
            path = self.folder / child / "predictions.parquet"
            path.parent.mkdir()
            rows.to_parquet(path, index=False)
            client.log_artifact(child, str(path))
            client.set_terminated(child)
        client.set_terminated(parent)
        return parent

    def tagged(self, tag: str, value: str) -> list[str]:
        return [r.info.run_id for r in self.client.search_runs([self.experiment_id], f"tags.`{tag}` = '{value}'")]


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path)


def nightly_cli(folder, *arguments, expect=0):
    """``opi-nightly`` from the command line; its output."""
    environment = cli_environment(folder, {"PREFECT_HOME": str(folder / "prefect")})  # these commands need no server
    done = subprocess.run([sys.executable, "-m", "flows.cli.nightly", *arguments], cwd=folder, env=environment,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == expect, f"exit {done.returncode}:\n{output[-3000:]}"
    return output
