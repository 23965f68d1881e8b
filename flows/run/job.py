"""One ``opi-eval`` job (one configuration, alone or in a sweep): checked, prepared, evaluated, recorded, and one
line saying what it scored."""
from __future__ import annotations

import logging
import time

from omegaconf import DictConfig

from flows.run.config import checked
from flows.run.configuration import evaluate
from flows.run.errors import run_or_explain
from flows.run.identity import describe
from flows.run.outputs import record, scrub_hydra_outputs
from flows.run.preflight import prepared
from flows.run.progress import finished_one

log = logging.getLogger("opi")


def evaluate_job(cfg: DictConfig) -> float:
    """Returns the headline OPI (BERTSim without gold relations), Hydra's job return value."""
    started = time.perf_counter()
    scrub_hydra_outputs()
    config = run_or_explain(prepared, checked(cfg))  # data problems stop here, before Prefect and any stage
    result = run_or_explain(evaluate, config)
    metrics = result["metrics"]
    metrics["seconds_total"] = time.perf_counter() - started
    run_or_explain(record, config, result)
    log.info("%s%s: %s  (%.1f s)", finished_one(), describe(config).name, scores_line(metrics),
             metrics["seconds_total"])
    return metrics.get("opi", metrics["bertsim"])


def scores_line(metrics: dict[str, float]) -> str:
    if "lrcr" in metrics:
        return f"BERTSim {metrics['bertsim']:.4f}  LRCR {metrics['lrcr']:.4f}  OPI-1 {metrics['opi_1']:.4f}"
    return f"BERTSim {metrics['bertsim']:.4f}  (no gold relations: no LRCR or OPI)"
