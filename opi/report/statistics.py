"""The report's numbers: pure functions over the configurations' per-example frames.

Every interval and paired test is by the report's unit (``ReportConfig.unit``: whole articles resampled and
swapped, or single examples; ``opi.metrics.stats``). p-values of a family of comparisons (each configuration
against the best; the bounds against the best; each relation's best against its runner-up) are adjusted together
with scipy's Benjamini-Hochberg; a verdict reads the adjusted p at α.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from opi.metrics.configuration import RANK_METRIC, answered, configuration_metrics
from opi.metrics.names import BERTSIM, LRCR, OPI_1
from opi.metrics.opi import beta_key
from opi.metrics.stats import Design, adjusted, compare, compare_column, design, gap_closed
from opi.report.base import PERFECT, RECALL_ONLY, Configuration, ReportSettings

SHOWN_MEANS = ["lrcr_question_only", "gap_closed", "gap_closed_ci_low", "gap_closed_ci_high",
               "retrieved_sentences_mean", "retrieved_words_mean", "support_recall", "answer_found", "evidence_hit",
               "right_article"]
ANSWER_SCORES = {BERTSIM: "similarity", "correctness": "correctness", "judge_mean": "judge_score"}
CALIBRATED = ["lrcr_calibrated", "lrcr_calibrated_ci_low", "lrcr_calibrated_ci_high", "opi_1_calibrated",
              "opi_1_calibrated_ci_low", "opi_1_calibrated_ci_high", "labels_used", "classifier_accuracy_vs_people"]


def verdict(p_adjusted: float, difference: float, alpha: float) -> str:
    """The best's difference from another (best minus other) read at α: the other is lower, higher, or not
    distinguishable."""
    if p_adjusted >= alpha:
        return "not distinguishable"
    return "lower" if difference > 0 else "higher"


def paired_rows(configurations: Sequence[Configuration]) -> dict[str, pd.DataFrame]:
    """Each configuration's rows on the examples every configuration answered (an LLM's empty replies and
    refusals leave an example out of one of them): the paired tests compare like with like."""
    answered_by_all = set.intersection(*(set(answered(c.predictions)["id"]) for c in configurations))
    return {c.name: c.predictions[c.predictions["id"].isin(answered_by_all)].reset_index(drop=True)
            for c in configurations}


def common_rows(configurations: Sequence[Configuration]) -> dict[str, pd.DataFrame]:
    """Each configuration's rows on the examples every one of them has (retrieval needs no answer)."""
    common = set.intersection(*(set(c.predictions["id"]) for c in configurations))
    return {c.name: c.predictions[c.predictions["id"].isin(common)].reset_index(drop=True) for c in configurations}


def sweep_design(runs: dict[str, pd.DataFrame], unit: str) -> Design:
    """How the examples the configurations are compared on are clustered (the first configuration's rows: every
    configuration has the same examples)."""
    return design(next(iter(runs.values())), unit)


def overall_rows(configurations: Sequence[Configuration], relations: Sequence[str], s: ReportSettings, key: str,
                 labelled: bool) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, dict[str, float]]]:
    """(one row per configuration, best by ``key`` first; per-relation rows of every configuration; each
    configuration's metrics)."""
    rows, per_relation, metrics_of = [], [], {}
    for c in configurations:
        metrics, table = configuration_metrics(c.predictions, relations, [1.0], s.beta, s.config.confidence,
                                               s.config.resamples, s.seed, s.config.unit)
        metrics_of[c.name] = metrics
        row = {"configuration": c.name, "kind": "bound" if c.bound else c.kind, "bound": c.bound,
               "n": len(c.predictions)}
        for name in dict.fromkeys([BERTSIM, LRCR, key] if labelled else [BERTSIM]):
            row.update({name: metrics[name], f"{name}_ci_low": metrics[f"{name}_ci_low"],
                        f"{name}_ci_high": metrics[f"{name}_ci_high"]})
        if labelled:
            row[f"{key}_mean"] = metrics[f"{key}_mean"]
        row.update({name: value for name, value in metrics.items() if name in SHOWN_MEANS or name in ANSWER_SCORES})
        rows.append(row)
        per_relation.append(table.assign(configuration=c.name))
    overall = pd.DataFrame(rows).sort_values(key, ascending=False, kind="stable").reset_index(drop=True)
    long = pd.concat(per_relation, ignore_index=True)
    return overall, long, metrics_of


def against_best(overall: pd.DataFrame, runs: dict[str, pd.DataFrame], s: ReportSettings, metric: str
                 ) -> pd.DataFrame:
    """Each configuration against the best contender (bounds are reference points, never "best"): paired
    permutation p-values, Benjamini-Hochberg adjusted over the contenders' comparisons (the bounds' over theirs);
    verdict lower / higher / not distinguishable."""
    contenders = overall[overall["kind"] != "bound"]
    best = (contenders if len(contenders) else overall)["configuration"].iloc[0]
    others = [c for c in overall["configuration"] if c != best]
    tests = {c: compare(runs[best], runs[c], metric, s.beta, s.config.alpha, s.config.permutations, s.seed,
                        s.config.unit) for c in others}
    bounds = set(overall.loc[overall["kind"] == "bound", "configuration"])
    p_adjusted = {}
    for family in ([c for c in others if c not in bounds], [c for c in others if c in bounds]):
        p_adjusted.update(zip(family, adjusted([tests[c].p_value for c in family])))
    verdicts = {best: "best", **{c: verdict(p_adjusted[c], tests[c].difference, s.config.alpha) for c in others}}
    names = overall["configuration"]
    return overall.assign(p_vs_best=[tests[c].p_value if c in tests else np.nan for c in names],
                          p_adjusted=[p_adjusted.get(c, np.nan) for c in names],
                          verdict=[verdicts[c] for c in names])


def between_bounds(overall: pd.DataFrame, configurations: Sequence[Configuration], runs: dict[str, pd.DataFrame],
                   s: ReportSettings, metric: str) -> pd.DataFrame:
    """With one random (lower) and one oracle (upper) configuration in the sweep: each configuration's share of
    the gap between them closed, with its interval, and the test of the bounds against each other."""
    bounds = {c.bound: runs[c.name] for c in configurations if c.bound}
    if set(bounds) != {"lower", "upper"}:
        return overall
    closed = {c.name: gap_closed(runs[c.name], bounds["lower"], bounds["upper"], metric, s.beta,
                                 s.config.confidence, s.config.resamples, s.seed, s.config.unit)
              for c in configurations}
    apart = compare(bounds["upper"], bounds["lower"], metric, s.beta, s.config.alpha, s.config.permutations, s.seed,
                    s.config.unit)
    names = overall["configuration"]
    return overall.assign(p_upper_vs_lower_bound=apart.p_value, gap_closed=[closed[c].value for c in names],
                          gap_closed_ci_low=[closed[c].low for c in names],
                          gap_closed_ci_high=[closed[c].high for c in names])


def relation_tables(long: pd.DataFrame, order: Sequence[str], relations: Sequence[str], metrics: Sequence[str]
                    ) -> dict[str, pd.DataFrame]:
    """relation x configuration, one table per metric (configurations in ``order``, relations in the label set's
    order, those without examples left out)."""
    present = set(long["relation"])
    return {metric: long.pivot(index="relation", columns="configuration", values=metric)[list(order)]
            .reindex([r for r in relations if r in present]) for metric in metrics}


def tied_with(table: pd.DataFrame, metric: str, value: float) -> list[str]:
    """The configurations whose ``metric`` equals ``value`` (a tie for the best is said, not broken by order)."""
    return table.loc[(table[metric] - value).abs() <= 1e-12, "configuration"].tolist()


def strengths(runs: dict[str, pd.DataFrame], long: pd.DataFrame, s: ReportSettings, contenders: Sequence[str]
              ) -> pd.DataFrame:
    """Per relation, the best contender (bounds left out), its margin over the runner-up and the paired test on
    that relation's examples; p-values Benjamini-Hochberg adjusted over the relations, "ahead" read on them."""
    key = beta_key(s.beta)
    records = []
    for relation, group in long[long["configuration"].isin(contenders)].groupby("relation", sort=False):
        ranked = group.sort_values(key, ascending=False, kind="stable")
        best = ranked.iloc[0]
        record = {"relation": relation, "n": int(best["n"]), "best": best["configuration"], key: best[key],
                  "tied": len(tied_with(ranked, key, best[key])) - 1}  # others as good: said, not hidden by order
        if len(ranked) > 1:
            second = ranked.iloc[1]
            of = [runs[c][runs[c]["relation"] == relation] for c in (best["configuration"], second["configuration"])]
            test = compare(*of, "opi", s.beta, s.config.alpha, s.config.permutations, s.seed, s.config.unit)
            record.update({"runner_up": second["configuration"], "margin": best[key] - second[key],
                           "p_value": test.p_value})
        records.append(record)
    table = pd.DataFrame(records)
    if "p_value" not in table:
        return table
    tested = table["p_value"].notna()
    table.loc[tested, "p_adjusted"] = adjusted(table.loc[tested, "p_value"].tolist())
    table["verdict"] = [None if pd.isna(p) else "ahead" if p < s.config.alpha else "not distinguishable"
                        for p in table["p_adjusted"]]
    return table


def answer_quality(overall: pd.DataFrame) -> pd.DataFrame:
    """Contenders ranked by BERTSim, with answer correctness and the judge where the runs have them."""
    table = overall[overall["kind"] != "bound"][["configuration", *[c for c in ANSWER_SCORES if c in overall]]]
    table = table.sort_values(BERTSIM, ascending=False, kind="stable").reset_index(drop=True)
    for name in ANSWER_SCORES:
        if name in table:
            table[f"{name}_rank"] = table[name].rank(ascending=False, method="min").astype("Int64")  # none: <NA>
    return table


def calibrated(configurations: Sequence[Configuration], metrics_of: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Raw beside calibrated LRCR and OPI-1, for the configurations people's labels calibrated, best first."""
    values_of = {c.name: dict(c.calibrated) for c in configurations}
    rows = [{"configuration": name, LRCR: metrics_of[name][LRCR], OPI_1: metrics_of[name][OPI_1],
             **{metric: values.get(metric) for metric in CALIBRATED}}
            for name, values in values_of.items() if values.get("lrcr_calibrated") is not None]
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).sort_values("opi_1_calibrated", ascending=False).reset_index(drop=True)


def retrieval_ndcg(table: pd.DataFrame) -> str | None:
    """The retrieval table's nDCG column (the cut-off nearest 4), None when no configuration has a ranking."""
    return next((c for c in table.columns if c.startswith("ndcg_at_") and RANK_METRIC.fullmatch(c)), None)


def cut_off(metric: str) -> int:
    """recall_at_4 -> 4."""
    return int(metric.rsplit("_", 1)[1])


def retrieval(configurations: Sequence[Configuration], metrics_of: dict[str, dict[str, float]], s: ReportSettings
              ) -> pd.DataFrame:
    """One row per configuration with retrieval metrics: nDCG at the cut-off nearest 4, MRR, recall at each k, with
    intervals; tested against the best by nDCG."""
    measured = [c for c in configurations if "retrieval_examples" in metrics_of[c.name]]
    if not measured:
        return pd.DataFrame()
    names = {name for c in measured for name in metrics_of[c.name] if RANK_METRIC.fullmatch(name)}
    ndcg_ks = [cut_off(n) for n in names if n.startswith("ndcg_at_")]
    shown = [*([f"ndcg_at_{min(ndcg_ks, key=lambda k: (abs(k - 4), k))}", "mrr"] if ndcg_ks else []),
             *sorted((n for n in names if n.startswith("recall_at_")), key=cut_off)]
    rows = []
    for c in measured:
        metrics = metrics_of[c.name]
        row = {"configuration": c.name, "kind": c.kind, "bound": c.bound, "n": int(metrics["retrieval_examples"])}
        row.update({column: metrics.get(column, np.nan) for name in shown
                    for column in (name, f"{name}_ci_low", f"{name}_ci_high")})
        rows.append(row)
    table = pd.DataFrame(rows)
    if not ndcg_ks:
        return table.assign(ndcg_p_value=np.nan, ndcg_p_adjusted=np.nan, ndcg_verdict=None, mrr_p_value=np.nan,
                            mrr_p_adjusted=np.nan, mrr_verdict=None, note=RECALL_ONLY)
    table = table.sort_values(shown[0], ascending=False, kind="stable", na_position="last").reset_index(drop=True)
    return retrieval_against_best(table, common_rows(measured), s, shown[0])


def retrieval_against_best(table: pd.DataFrame, runs: dict[str, pd.DataFrame], s: ReportSettings, ndcg: str
                           ) -> pd.DataFrame:
    """The best contender by nDCG (bounds never), and every other ranked configuration but the oracle tested
    against it on nDCG and on MRR: paired permutation p-values, each metric's Benjamini-Hochberg adjusted over its
    comparisons."""
    ranked = table[table[ndcg].notna()]
    contenders = ranked[ranked["bound"].isna()]["configuration"].tolist()
    best = contenders[0] if contenders else None
    tested = [c for c, bound in zip(ranked["configuration"], ranked["bound"]) if c != best and bound != "upper"]
    names = table["configuration"]
    columns = {}
    for prefix, metric in (("ndcg", ndcg), ("mrr", "mrr")):
        tests = {c: compare_column(runs[best], runs[c], metric, s.config.alpha, s.config.permutations, s.seed,
                                   s.config.unit) for c in (tested if best else [])}
        p_adjusted = dict(zip(tests, adjusted([t.p_value for t in tests.values()])))
        verdicts = {best: "best", **{c: verdict(p_adjusted[c], tests[c].difference, s.config.alpha) for c in tests}}
        columns.update({f"{prefix}_p_value": [tests[c].p_value if c in tests else np.nan for c in names],
                        f"{prefix}_p_adjusted": [p_adjusted.get(c, np.nan) for c in names],
                        f"{prefix}_verdict": [verdicts.get(c) for c in names]})
    notes = [PERFECT if bound == "upper" else RECALL_ONLY if pd.isna(value) else None
             for bound, value in zip(table["bound"], table[ndcg])]
    return table.assign(**columns, note=notes)
