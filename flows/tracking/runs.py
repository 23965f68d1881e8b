"""One run per configuration (nested under the sweep's parent run when there is one), its settings as params and
``config.yaml``, its metrics and tables: never a secret (``opi.secrets``). Its headline metrics are MLflow metrics
(``tracking.detail=full``: every one); all of them are in its ``metrics.json``."""
from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from mlflow.entities import Metric, Param, RunTag
from omegaconf import OmegaConf

from flows.tracking.owners import this_process
from flows.tracking.store import open_experiment
from opi.schemas import TrackingConfig
from flows.tracking.traces import TraceCount
from opi.secrets import is_secret_name, redact_url, redact_values

log = logging.getLogger("opi")

PARENT_ENV = "OPI_PARENT_RUN_ID"  # set by the sweep's parent run for its jobs (and the processes they start)
METRICS_FILE = "metrics.json"
HEADLINE_CUT = 4  # the retrieval cut-off logged at top level (the report's: 4, or the cut-off nearest it)
CUT_OFF = re.compile(r"(?:recall_at|ndcg_at)_(\d+)(?:_ci_low|_ci_high)?")  # opi.metrics.retrieval's per-k series


def cut_off(name: str) -> int | None:
    """The k of a per-k retrieval metric (``ndcg_at_4_ci_low`` -> 4); None for any other metric."""
    found = CUT_OFF.fullmatch(name)
    return int(found.group(1)) if found else None


def logged_metrics(metrics: dict[str, float], detail: str) -> dict[str, float]:
    """What a run logs as MLflow metrics: every one (``full``), or the headline: no per-relation values
    (``<metric>.<relation>``) and the per-k retrieval metrics at one cut-off, ``HEADLINE_CUT`` or the nearest."""
    if detail == "full":
        return dict(metrics)
    cuts = {k for k in map(cut_off, metrics) if k is not None}
    shown = min(cuts, key=lambda k: (abs(k - HEADLINE_CUT), k)) if cuts else None
    return {name: value for name, value in metrics.items() if "." not in name and cut_off(name) in (None, shown)}


def metrics_json(metrics: dict[str, float]) -> str:
    """Every metric of a run, by name (a value that is not a finite number as null)."""
    return json.dumps({name: float(value) if math.isfinite(float(value)) else None
                       for name, value in sorted(metrics.items())}, indent=1)


def flatten(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys -> values, without secret-named settings and with credentials in values redacted."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        elif not is_secret_name(name):
            flat[name] = redact_values(value)
    return flat


MAX_PARAM = 6000  # characters of an MLflow param's value


def params_of(settings: dict[str, Any]) -> dict[str, str]:
    """A configuration's settings as its run's MLflow params: flat, without secrets, each cut to ``MAX_PARAM``."""
    return {key: str(value)[:MAX_PARAM] for key, value in flatten(settings).items()}


def run_tags(tracking: TrackingConfig) -> dict[str, str]:
    """Tags of every run OPI opens: its owner process (for fail_orphans) and the sweep's label, if any."""
    host, pid = this_process()
    return {"opi.host": host, "opi.pid": pid, **({"opi.label": tracking.label} if tracking.label else {})}


def log_run(tracking: TrackingConfig, run_name: str, settings: dict[str, Any], metrics: dict[str, float],
            tables: dict[str, Any], tags: dict[str, str],
            traces: Callable[[str, str], TraceCount] | None = None) -> str:
    """Log one configuration's run; returns its id. ``settings``: its effective settings as plain data; ``metrics``:
    all of them (``metrics.json``), the MLflow metrics as ``tracking.detail`` says; ``traces``: writes the run's
    per-example traces (experiment id, run id) after its metrics and artifacts, so a process killed while writing
    them leaves the metrics whole; how many were written is logged too."""
    client, experiment_id = open_experiment(tracking)
    parent = os.environ.get(PARENT_ENV)
    all_tags = {**tags, **run_tags(tracking), **({"mlflow.parentRunId": parent} if parent else {})}
    run = client.create_run(experiment_id, run_name=run_name, tags=all_tags)
    try:
        now = int(time.time() * 1000)
        client.log_batch(run.info.run_id,
                         metrics=[Metric(k, float(v), now, 0)
                                  for k, v in logged_metrics(metrics, tracking.detail).items()],
                         params=[Param(k, v) for k, v in params_of(settings).items()])
        with tempfile.TemporaryDirectory() as folder:
            for name, frame in tables.items():
                path = Path(folder) / name
                if name.endswith(".parquet"):
                    frame.to_parquet(path, index=False)
                else:
                    frame.to_csv(path, index=False)
            (Path(folder) / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(redact_values(settings))))
            (Path(folder) / METRICS_FILE).write_text(metrics_json(metrics))
            client.log_artifacts(run.info.run_id, folder)
        if traces is not None:
            count = traces(experiment_id, run.info.run_id)
            client.log_batch(run.info.run_id, metrics=[Metric(k, v, int(time.time() * 1000), 0)
                                                       for k, v in count.metrics().items()],
                             tags=[RunTag(k, v) for k, v in count.tags().items()])
            if count.failed:
                log.warning("%s: %d of %d traces could not be written to %s (its metrics and predictions are "
                            "logged)", run_name, count.failed, count.expected, redact_url(tracking.tracking_uri))
    except BaseException:
        client.set_terminated(run.info.run_id, status="FAILED")
        raise
    client.set_terminated(run.info.run_id, status="FINISHED")
    return run.info.run_id
