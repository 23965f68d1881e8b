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
    for line in failure_lines(metrics, len(result["predictions"])):
        log.warning("%s: %s", describe(config).name, line)
    return metrics.get("opi", metrics["bertsim"])


# what a count of failures means, said once per configuration when it is not zero
FAILURES = {
    "answers_missing": "{n} of {total} questions got no answer (the LLM's reply was empty or a refusal, also when "
                       "asked again): left out of BERTSim, LRCR and OPI",
    "parse_failures": "{n} of {total} relation replies could not be parsed (asked again, then recorded as 'unknown', "
                      "which counts as wrong)",
    "gold_relations_missing": "{n} of {total} gold answers got no relation from the classifier: left out of LRCR "
                              "and OPI",
    "correctness_failures": "{n} of {total} answer-correctness replies could not be parsed: left out of its average",
    "judge_failures": "{n} of {total} judge replies could not be parsed: left out of its average",
    "llm_classify_empty_replies": "{n} relation replies were empty (also when asked again): recorded as 'unknown'",
    "llm_classify_refusals": "{n} relation replies were refusals: recorded as 'unknown'",
    "llm_metrics_empty_replies": "{n} answer-metric replies were empty: those scores are missing",
    "llm_metrics_refusals": "{n} answer-metric replies were refusals: those scores are missing",
}


def failure_lines(metrics: dict[str, float], total: int) -> list[str]:
    lines = [text.format(n=int(metrics[name]), total=total) for name, text in FAILURES.items() if metrics.get(name)]
    unknown = int(metrics.get("unknown_relations", 0)) - int(metrics.get("parse_failures", 0))
    if unknown > 0:  # beyond the parse failures: a classifier that could not name a relation of the set
        lines.append(f"{unknown} of {total} answers got the relation 'unknown' (counted as wrong)")
    return lines


def scores_line(metrics: dict[str, float]) -> str:
    if "lrcr" in metrics:
        return f"BERTSim {metrics['bertsim']:.4f}  LRCR {metrics['lrcr']:.4f}  OPI-1 {metrics['opi_1']:.4f}"
    return f"BERTSim {metrics['bertsim']:.4f}  (no gold relations: no LRCR or OPI)"
