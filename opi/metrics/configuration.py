"""One configuration's numbers, from its per-example rows (``opi.predictions.prediction_rows``): what every run logs
and what the sweep report tabulates, computed in this one place.

- headline BERTSim, LRCR and OPI at each β (Formula 3 and the mean of per-relation OPIs), ``opi`` at the chosen β;
- bootstrap intervals by cluster (``<metric>_ci_low`` / ``_high``; ``unit``: article or example, see
  ``opi.metrics.stats``);
- per relation ``<metric>.<relation>`` and ``n.<relation>``;
- means of the retrieval diagnostics and of the LLM-scored answer metrics where present (missing values left out);
- where the rows have the rank-aware retrieval metrics (``opi.metrics.retrieval``: ``recall_at_<k>``,
  ``ndcg_at_<k>``, ``mrr``), their means over the examples with gold evidence in a chunk, with intervals, and
  ``retrieval_examples``, how many examples those are, and ``retrieval_evidence_too_long``, how many are left out
  because their evidence is longer than every chunk (where any is);
- ``unknown_relations``: answers a classifier could not label (always counted as wrong);
- ``lrcr_question_only``: LRCR of the same classifier shown the question alone (answer and text blanked), where
  the rows have it: how much of LRCR the wording of the questions explains, whatever was retrieved.
Rows without gold relations (``relations.gold=none``) get BERTSim, its interval and the means: no LRCR or OPI,
absent rather than 0 or NaN. Where only some rows lack one (an LLM could not name a gold answer's relation), LRCR
and OPI are over the others and ``gold_relations_missing`` counts them.
"""
from __future__ import annotations

import re
from typing import Sequence

import pandas as pd

from opi.diagnostics import COLUMNS as DIAGNOSTIC_COLUMNS
from opi.metrics.names import BERTSIM
from opi.metrics.opi import beta_key, bertsim, summary
from opi.metrics.retrieval import TOO_LONG
from opi.metrics.stats import column_interval, confidence_intervals
from opi.relations import UNKNOWN

RETRIEVAL_MEANS = ("retrieved_sentences", "retrieved_words", *DIAGNOSTIC_COLUMNS, "answer_in_chunks", "right_article")
ANSWER_SCORE_MEANS = {"correctness": "correctness", "correctness_f1": "correctness_f1", "judge_score": "judge_mean"}
RANK_METRIC = re.compile(r"(recall_at|ndcg_at)_\d+|mrr")  # opi.metrics.retrieval's columns


def means(rows: pd.DataFrame) -> dict[str, float]:
    """Per-configuration means of the diagnostics and answer scores the rows have (missing values left out)."""
    found = {}
    for column, name in [*[(c, f"{c}_mean" if c.startswith("retrieved_") else c) for c in RETRIEVAL_MEANS],
                         *ANSWER_SCORE_MEANS.items()]:
        if column in rows and rows[column].notna().any():
            found[name] = float(pd.to_numeric(rows[column]).dropna().mean())
    return found


def configuration_metrics(rows: pd.DataFrame, relations: Sequence[str], betas: Sequence[float], beta: float,
                          confidence: float = 0.95, resamples: int = 2000, seed: int = 0, unit: str = "article"
                          ) -> tuple[dict[str, float], pd.DataFrame]:
    """(metrics, per-relation table) of one configuration. Examples without an answer (an LLM's empty replies and
    refusals) are left out of BERTSim, LRCR and OPI and counted in ``answers_missing``."""
    every = rows
    rows = answered(rows)
    missing = {"answers_missing": float(len(every) - len(rows))} if len(rows) < len(every) else {}
    if not has_gold_relations(rows):
        interval = confidence_intervals(rows, beta, confidence, resamples, seed, (BERTSIM,), unit)[BERTSIM]
        metrics = {BERTSIM: bertsim(rows["similarity"].tolist()), "n_examples": float(len(rows)),
                   "bertsim_ci_low": interval.low, "bertsim_ci_high": interval.high, **means(every), **missing,
                   **rank_metrics(every, confidence, resamples, seed, unit)}
        return metrics, pd.DataFrame(columns=["relation", "n", BERTSIM])
    labelled = rows[rows["relation"].notna()]  # a gold relation the classifier could not name: left out here
    metrics, table = summary(labelled, relations, sorted({*betas, beta}))
    metrics["opi"] = metrics[beta_key(beta)]
    if len(labelled) < len(rows):
        metrics.update(bertsim=bertsim(rows["similarity"].tolist()), n_examples=float(len(rows)),
                       gold_relations_missing=float(len(rows) - len(labelled)))
    intervals = confidence_intervals(labelled, beta, confidence, resamples, seed, unit=unit)
    if len(labelled) < len(rows):  # BERTSim is over every row: so is its interval (missing relations one stratum)
        intervals.update(confidence_intervals(rows, beta, confidence, resamples, seed, (BERTSIM,), unit))
    for name, interval in intervals.items():
        metrics[f"{name}_ci_low"], metrics[f"{name}_ci_high"] = interval.low, interval.high
    for record in table.to_dict("records"):
        for key, value in record.items():
            if key != "relation":
                metrics[f"{key}.{record['relation']}"] = float(value)
    metrics.update({**means(every), **missing})
    metrics["unknown_relations"] = float((rows["predicted_relation"] == UNKNOWN).sum())
    if "predicted_relation_question_only" in labelled:
        metrics["lrcr_question_only"] = float((labelled["relation"] == labelled["predicted_relation_question_only"])
                                              .mean())
    metrics.update(rank_metrics(every, confidence, resamples, seed, unit))
    return metrics, table


def rank_metric_columns(rows: pd.DataFrame) -> list[str]:
    return [column for column in rows.columns if RANK_METRIC.fullmatch(str(column))]


def rank_metrics(rows: pd.DataFrame, confidence: float = 0.95, resamples: int = 2000, seed: int = 0,
                 unit: str = "article") -> dict[str, float]:
    """Means of the retrieval metrics over the examples that have them (retrieval needs no answer: every row),
    with bootstrap intervals by cluster; nothing when the rows have no such column."""
    columns = rank_metric_columns(rows)
    too_long = {"retrieval_evidence_too_long": float(rows[TOO_LONG].notna().sum())} if TOO_LONG in rows else {}
    if not columns:  # no example has them (said, where it is for evidence no chunk can hold: opi.metrics.retrieval)
        return too_long
    metrics = {"retrieval_examples": float(rows[columns].notna().any(axis=1).sum()), **too_long}
    for column in columns:
        interval = column_interval(rows, column, confidence, resamples, seed, unit)
        if interval is not None:
            metrics.update({column: interval.value, f"{column}_ci_low": interval.low,
                            f"{column}_ci_high": interval.high})
    return metrics


def answered(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows whose example got an answer (all of them, for a reader that always answers)."""
    if "generated_answer" not in rows or rows["generated_answer"].notna().all():
        return rows
    return rows[rows["generated_answer"].notna()]


def has_gold_relations(rows: pd.DataFrame) -> bool:
    return bool(rows["relation"].notna().any())


SPENT = ("http_requests", "retries", "prompt_tokens", "completion_tokens", "cost_usd")  # what a call pays for


def as_reused(metrics: dict[str, float]) -> dict[str, float]:
    """``metrics`` with their LLM usage (``<use>_calls``, ``_cache_hits``, ``_http_requests``, ... and the totals)
    as a run that reuses the result spends it: every call a cache hit, nothing requested, no tokens, no cost. A
    run whose replies all come from the LLM call cache logs the same; the run that computed the result keeps what
    it paid."""
    uses = [name[:-len("_calls")] for name in metrics
            if name.endswith("_calls") and f"{name[:-len('_calls')]}_http_requests" in metrics]
    reused = dict(metrics)
    for use in uses:
        reused[f"{use}_cache_hits"] = metrics[f"{use}_calls"]
        reused.update({f"{use}_{name}": 0.0 for name in SPENT if f"{use}_{name}" in metrics})
    reused.update({name: 0.0 for name in ("llm_cost_usd", "llm_tokens") if name in metrics})
    return reused


def usage_totals(usage: dict[str, float]) -> dict[str, float]:
    """Cost and tokens over every LLM use of a run (answers, relations, answer metrics)."""
    if not usage:
        return {}
    return {"llm_cost_usd": sum(v for k, v in usage.items() if k.endswith("_cost_usd")),
            "llm_tokens": sum(v for k, v in usage.items() if k.endswith("_tokens"))}
