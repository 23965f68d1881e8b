"""Empty MLflow stores for unit tests, fast: a SQLite store's schema migration costs seconds, so one store is
migrated once per test process and each test gets a copy of it (``empty_store``). Its Default experiment's
artifact location is the template's folder: tests create experiments of their own (``experiment``)."""
from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from mlflow import MlflowClient

_TEMPLATE: list[Path] = []


def _template() -> Path:
    if not _TEMPLATE:
        folder = Path(tempfile.mkdtemp(prefix="opi-mlflow-template-"))
        atexit.register(shutil.rmtree, folder, True)
        MlflowClient(f"sqlite:///{folder}/mlflow.db").search_experiments()  # creates and migrates the schema
        _TEMPLATE.append(folder / "mlflow.db")
    return _TEMPLATE[0]


def empty_store(folder: Path) -> str:
    """The tracking URI of a new, empty (migrated) SQLite MLflow store at ``folder/mlflow.db``."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_template(), folder / "mlflow.db")
    return f"sqlite:///{folder}/mlflow.db"


def experiment(client: MlflowClient, folder: Path, name: str = "opi") -> str:
    """An experiment whose artifacts go under ``folder/artifacts``; its id."""
    return client.create_experiment(name, artifact_location=(folder / "artifacts").resolve().as_uri())
