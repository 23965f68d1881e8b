"""One ``opi-eval`` job (one configuration, alone or in a sweep): checked, prepared, evaluated, recorded, and one
line saying what it scored."""
from __future__ import annotations

import logging
import time

from omegaconf import DictConfig

from flows.run.config import checked
from flows.run.configuration import evaluate
from flows.base.errors import run_or_explain
from flows.run.identity import describe
from flows.run.outputs import record, scrub_hydra_outputs
from flows.run.preflight import prepared
from flows.base.progress import finished_one
from opi.llm.client import CHARS_PER_TOKEN
from opi.metrics.names import BERTSIM, LRCR

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
    lines = failure_lines(metrics, len(result["predictions"]))
    coverage = coverage_line(metrics, len(result["predictions"]), config.chunking, config.metrics.evidence_match)
    for line in [*lines, *([coverage] if coverage else [])]:
        log.warning("%s: %s", describe(config).name, line)
    return metrics.get("opi", metrics[BERTSIM])


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
    for stage, what in LLM_STAGES.items():
        if metrics.get(f"{stage}_overlong_replies"):
            lines.append(f"{int(metrics[f'{stage}_overlong_replies'])} {what} replies were far longer than "
                         f"llm.max_tokens allows (the endpoint ignores it): cut to about max_tokens "
                         f"({CHARS_PER_TOKEN} characters a token)")
    rerank = rerank_line(metrics)
    return lines if rerank is None else [*lines, rerank]


LLM_STAGES = {"llm_answer": "answer", "llm_classify": "relation", "llm_metrics": "answer-metric",
              "llm_rerank": "reranker"}  # the prefix of each stage's LLM usage metrics, and what its replies are


def coverage_line(metrics: dict[str, float], total: int, chunking, evidence_match: str = "whole") -> str | None:
    """What the rank-aware retrieval metrics (recall@k, nDCG@k, MRR) cover, when it is not every example: those
    whose evidence is longer than every chunk (no chunk holds it whole), and the others without a chunk holding
    their evidence (none given, or across a chunk boundary)."""
    covered = int(metrics.get("retrieval_examples", 0))  # none where no example has them
    if ("retrieval_examples" not in metrics and "retrieval_evidence_too_long" not in metrics) or covered >= total:
        return None
    too_long = int(metrics.get("retrieval_evidence_too_long", 0))
    other = total - covered - too_long
    reasons = [*([f"{too_long} have evidence longer than a chunk (chunking.size={chunking.size} {chunking.length})"]
                 if too_long else []),
               *([f"{other} have no evidence a chunk holds (none given, across a chunk boundary, or no chunk of their "
                   "article)"] if other else [])]
    hint = ("; metrics.evidence_match=sentence counts a chunk that holds a whole sentence of it"
            if too_long and evidence_match == "whole" else "")
    return f"retrieval metrics cover {covered} of {total} examples: {', '.join(reasons)}{hint}"


def rerank_line(metrics: dict[str, float]) -> str | None:
    """What a reranker left unscored (``rerank_unscored`` of ``rerank_pairs`` candidates: an LLM reply that could
    not be parsed or was empty, also when asked again; a model's NaN), said when it is not zero; when it is every
    candidate, the reranking did nothing."""
    unscored, pairs = int(metrics.get("rerank_unscored", 0)), int(metrics.get("rerank_pairs", 0))
    if unscored <= 0:
        return None
    parse = int(metrics.get("rerank_parse_failures", 0))
    why = (f"{parse} replies could not be parsed, also when asked again" if parse else
           "the reranker gave no score")
    if unscored >= pairs:
        return (f"all {pairs} reranker candidates got no score ({why}): the reranking did nothing, the order is the "
                "retriever's")
    return (f"{unscored} of {pairs} reranker candidates got no score ({why}): they follow the scored ones, in the "
            "retriever's order")


def scores_line(metrics: dict[str, float]) -> str:
    if LRCR in metrics:
        return f"BERTSim {metrics['bertsim']:.4f}  LRCR {metrics['lrcr']:.4f}  OPI-1 {metrics['opi_1']:.4f}"
    return f"BERTSim {metrics['bertsim']:.4f}  (no gold relations: no LRCR or OPI)"
