"""What a user reads while a sweep runs: what will run, a line per finished configuration with the sweep's elapsed
time and an estimate of what is left, and where to see the results in the MLflow UI."""
from __future__ import annotations

import time
from urllib.parse import quote

from hydra_plugins.opi_sweeper import sweep_of
from opi.metrics.names import OPI_1

_SWEEP: dict[str, float] = {}  # size, started, done, first (when the first job ended): this process's sweep


def planned_sweep(config, config_loader=None) -> tuple[int | None, str | None]:
    """How many jobs a multirun of ``config`` (Hydra's, with its ``hydra`` node) launches, as the sweeper expands it
    (None when it cannot be told here), and a note when a command-line value replaced a swept one
    (``experiment=smoke setup=a_four``: one configuration, not two)."""
    try:
        sweep = sweep_of(config, config_loader)
    except Exception:  # the sweeper alone can expand this (or will refuse it, with its own message)
        return None, None
    notes = [f"{replacing} replaces the sweep {earlier}" for earlier, replacing in sweep.replaced.values()]
    return len(sweep.jobs), "; ".join(notes) or None


def start_sweep(size: int | None) -> None:
    _SWEEP.update(size=size or 0, started=time.monotonic(), done=0)


def planned() -> int | None:
    """How many configurations this process's sweep was planned to run (None: unknown, or no sweep)."""
    return int(_SWEEP["size"]) if _SWEEP.get("size") else None


def finished_one() -> str:
    """``[3/15, 1:05 elapsed, about 4:20 left] `` for a job of a sweep; empty outside one. The estimate is the
    mean time of the jobs after the first (which also pays for loading the data and the model) times the jobs
    left."""
    if not _SWEEP:
        return ""
    now = time.monotonic()
    _SWEEP["done"] += 1
    _SWEEP.setdefault("first", now)
    elapsed, done, size = now - _SWEEP["started"], _SWEEP["done"], _SWEEP["size"]
    if not size:
        return f"[{done:.0f} done, {clock(elapsed)} elapsed] "
    left = ""
    if 1 < done < size:
        left = f", about {clock((now - _SWEEP['first']) / (done - 1) * (size - done))} left"
    return f"[{done:.0f}/{size:.0f}, {clock(elapsed)} elapsed{left}] "


def clock(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}:{seconds:02d}"


def ui_pointer(tracking_uri: str, experiment_id: str, parent: str, size: int, metric: str = OPI_1) -> str:
    """The command that opens the MLflow UI on this store and the address of this sweep's runs table."""
    if tracking_uri.startswith(("http://", "https://")):
        command, base = "", tracking_uri.rstrip("/")
    else:
        command, base = f"mlflow ui --backend-store-uri {tracking_uri} --port 5000", "http://127.0.0.1:5000"
    url = (f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning&searchFilter="
           + quote(f"tags.mlflow.parentRunId = '{parent}'"))
    opening = f"open the MLflow UI with: {command}\nthen " if command else ""
    traces = f"{base}/#/experiments/{experiment_id}/evaluation-runs?workflowType=genai"
    view = f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={parent}"
    return (f"{opening}{url}\n(the sweep's parent run, in MLflow's 'Model training' view: its + shows the {size} "
            f"configurations, Columns adds metrics such as {metric})\nevery configuration charted, best first: "
            f"{view}\nper-example traces: {traces}\n(GenAI view, "
            "'Evaluation runs': a configuration's Traces tab, 'compare to' another on the same questions)")
