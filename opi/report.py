"""The sweep report: the paper's tables with uncertainty, plots, and a verdict on which differences are real.

Input: each configuration's per-example predictions (as ``opi.predictions.prediction_rows`` writes them). Output
(``SweepReport.write``): csv tables, ``heatmap.png`` (relation x configuration OPI-1), ``bars.png`` (BERTSim,
LRCR, OPI-1 with bootstrap intervals), ``report.html`` and ``report.md``.

- ``overall``: one row per configuration, best OPI-1 first, with intervals, retrieval diagnostics and the paired
  permutation test against the best configuration (p-values adjusted for the number of comparisons with scipy's
  Benjamini-Hochberg), verdict "best" / "not distinguishable" / "lower".
- ``relation_<metric>``: relation x configuration (the paper's Table 2 / Table 4 shape) for bertsim, lrcr, opi_1.
- ``answer_quality``: configurations ranked by BERTSim (and answer correctness / judge when the runs have them),
  the shape of the paper's Table 3.
- ``strengths``: per relation, the best configuration, its margin over the runner-up and whether that margin is
  distinguishable from noise on that relation's examples.
- ``retrieval`` (where the runs have ``opi.metrics.retrieval``'s columns): nDCG@4 (or the cut-off nearest 4), MRR
  and recall@k against the gold evidence, with intervals, each configuration tested against the best by nDCG on
  nDCG and on MRR (Benjamini-Hochberg adjusted, as the OPI table). S- configurations (an unordered union) have
  recall only; the oracle bound ranks from the gold evidence itself: "perfect by construction", never compared.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from opi.metrics.configuration import RANK_METRIC, answered, configuration_metrics, has_gold_relations
from opi.metrics.opi import beta_key
from opi.metrics.stats import compare, compare_column, gap_closed
from opi.schemas import ReportConfig

SHOWN_MEANS = ["lrcr_question_only", "gap_closed", "gap_closed_ci_low", "gap_closed_ci_high",
               "retrieved_sentences_mean", "retrieved_words_mean", "support_recall", "answer_found", "evidence_hit",
               "right_article"]
ANSWER_SCORES = {"bertsim": "similarity", "correctness": "correctness", "judge_mean": "judge_score"}
PERFECT = "perfect by construction"  # the oracle's retrieval note: it ranks from the gold evidence
RECALL_ONLY = "unordered: recall only"


@dataclass(frozen=True)
class Configuration:
    """One configuration of a sweep, as its run recorded it."""
    name: str  # the run name
    kind: str  # single | A- | S-
    setup: str  # kNN, A-Four, ...: the short label in plots
    predictions: pd.DataFrame
    bound: str | None = None  # lower (random retriever) | upper (oracle) | None (a contender)
    calibrated: tuple[tuple[str, float], ...] = ()  # its LRCR / OPI-1 calibrated by people's labels (opi-label)


@dataclass(frozen=True)
class ReportSettings:
    """The report's statistics settings, and the sweep's β, seed and where its gold relations came from."""
    config: ReportConfig
    beta: float = 1.0
    seed: int = 0
    gold_source: str | None = None  # labels | classifier | none (relations.gold of the runs)
    incomplete: str | None = None  # why the sweep's report covers fewer configurations than it planned
    scope: str | None = None  # article | corpus (retrieval.scope of the runs)


GOLD_SOURCES = {"labels": "the data's relation labels",
                "classifier": "the relation classifier's labels of the gold answers (as in the paper): LRCR is "
                              "agreement between the classifier on the gold and on the generated answers",
                "none": "none (relations.gold=none): LRCR and OPI are not computed, configurations are ranked by "
                        "BERTSim"}


SCOPES = {"article": "within each example's own article (the paper's setting)",
          "corpus": "across one index of every article of the dataset (retrieval.scope=corpus), as deployed RAG does"}


def display(metric: str) -> str:
    """opi_1 -> OPI-1, opi_0_5 -> OPI-0.5, bertsim -> BERTSim, lrcr -> LRCR."""
    if metric.startswith("opi_"):
        return "OPI-" + metric[4:].replace("_", ".")
    for prefix, shown in (("ndcg_at_", "nDCG@"), ("recall_at_", "recall@")):
        if metric.startswith(prefix):
            return shown + metric.removeprefix(prefix)
    return {"bertsim": "BERTSim", "lrcr": "LRCR", "mrr": "MRR"}.get(metric, metric)


@dataclass
class SweepReport:
    overall: pd.DataFrame
    per_relation: pd.DataFrame
    strengths: pd.DataFrame
    answer_quality: pd.DataFrame
    settings: ReportSettings
    labels: dict[str, str]  # configuration -> short label
    rank_by: str  # the metric configurations are ranked and tested on: opi_<β>, or bertsim without gold relations
    relation_tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    retrieval: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty: the runs have no retrieval metrics
    calibrated: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty: no people's labels imported

    def write(self, folder: str | Path) -> list[Path]:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tables = {"overall": self.overall, "per_relation": self.per_relation, "strengths": self.strengths,
                  "answer_quality": self.answer_quality, "retrieval": self.retrieval, "calibrated": self.calibrated,
                  **{f"relation_{name}": table for name, table in self.relation_tables.items()}}
        paths = []
        for name, table in tables.items():
            if table.empty:  # no relations, no relation tables: no empty file either
                continue
            paths.append(folder / f"{name}.csv")
            table.to_csv(paths[-1], index=name.startswith("relation_"))
        if self.relation_tables:
            paths.append(plot_heatmap(self.relation_tables[self.rank_by], self.labels, folder / "heatmap.png",
                                      self.rank_by))
        paths.append(plot_bars(self.overall, self.labels, self.metrics, self.settings.config.confidence,
                               folder / "bars.png"))
        (folder / "report.md").write_text(self.markdown())
        (folder / "report.html").write_text(self.html())
        return paths + [folder / "report.md", folder / "report.html"]

    @property
    def opi_name(self) -> str:
        return beta_key(self.settings.beta)

    @property
    def best(self) -> pd.Series:
        """The best contender's row (the random and oracle bounds are reference points)."""
        return self.overall[self.overall["verdict"] == "best"].iloc[0]

    @property
    def metrics(self) -> list[str]:
        return ["bertsim", "lrcr", self.rank_by] if self.relation_tables else ["bertsim"]

    def headline(self) -> str:
        s, o, key = self.settings.config, self.overall, self.rank_by
        best = self.best
        tied = o[o["verdict"] == "not distinguishable"]["configuration"].tolist()
        text = f"**Incomplete sweep**: {self.settings.incomplete}. " if self.settings.incomplete else ""
        text += f"Retrieval: {SCOPES[self.settings.scope]}. " if self.settings.scope else ""
        text += f"Gold relations: {GOLD_SOURCES[self.settings.gold_source]}. " if self.settings.gold_source else ""
        text += (f"{len(o)} configurations, {int(best['n'])} examples each. Best by {display(key)}: "
                 f"**{best['configuration']}** ({best[key]:.3f}, {s.confidence:.0%} interval "
                 f"{best[key + '_ci_low']:.3f}-{best[key + '_ci_high']:.3f}). ")
        contenders = o[o["kind"] != "bound"]
        if tied:
            text += (f"Not distinguishable from it at α = {s.alpha} (paired permutation test, Benjamini-Hochberg "
                     f"adjusted): {', '.join(tied)}.")
        elif len(contenders) > 1:
            text += f"Every other configuration is lower at α = {s.alpha}."
        if "gap_closed" in o:
            lower, upper = (o[o["bound"] == b].iloc[0] for b in ("lower", "upper"))
            text += (f" Bounds: {lower['configuration']} {lower[key]:.3f}, {upper['configuration']} {upper[key]:.3f} "
                     f"(apart at p = {upper['p_upper_vs_lower_bound']:.3g}; the upper bound {upper['verdict']} than the "
                     f"best at adjusted p = {upper['p_adjusted']:.3g}); the best closes {best['gap_closed']:.0%} of the "
                     f"gap between them ({s.confidence:.0%} interval {best['gap_closed_ci_low']:.0%}-"
                     f"{best['gap_closed_ci_high']:.0%}).")
        return text + self._retrieval_headline()

    def _retrieval_headline(self) -> str:
        """One sentence: whose retrieval differs significantly from the best's, whose does not."""
        t, s = self.retrieval, self.settings.config
        if t.empty or not (t["ndcg_verdict"] == "best").any():
            return ""
        ndcg = retrieval_ndcg(t)
        best = t[t["ndcg_verdict"] == "best"].iloc[0]
        tested = t[t["ndcg_p_adjusted"].notna()]
        differs = (tested["ndcg_p_adjusted"] < s.alpha) | (tested["mrr_p_adjusted"] < s.alpha)
        untested = [f"{r['configuration']} ({r['note']})" for r in t[t["note"].notna()].to_dict("records")]
        text = (f" Retrieval against the gold evidence ({display(ndcg)} and MRR, paired permutation tests, "
                f"Benjamini-Hochberg adjusted, α = {s.alpha}): best **{best['configuration']}** "
                f"({display(ndcg)} {best[ndcg]:.3f}, MRR {best['mrr']:.3f}); significantly different from it: "
                f"{', '.join(tested[differs]['configuration']) or 'none'}; not distinguishable: "
                f"{', '.join(tested[~differs]['configuration']) or 'none'}")
        return text + (f"; not compared: {', '.join(untested)}." if untested else ".")

    def _retrieval_section(self) -> pd.DataFrame:
        """The retrieval table as shown: each metric with its interval in one cell."""
        t = self.retrieval
        shown = {"configuration": t["configuration"], "n": t["n"]}
        for metric in [c for c in t.columns if RANK_METRIC.fullmatch(c)]:
            shown[display(metric)] = [with_interval(v, low, high) for v, low, high in
                                      zip(t[metric], t[f"{metric}_ci_low"], t[f"{metric}_ci_high"])]
        for column in ("ndcg_p_adjusted", "ndcg_verdict", "mrr_p_adjusted", "mrr_verdict", "note"):
            shown[column] = t[column] if column.endswith("_adjusted") else t[column].fillna("")
        return pd.DataFrame(shown)

    def _sections(self) -> list[tuple[str, pd.DataFrame]]:
        shown = ["configuration", *dict.fromkeys(self.metrics), f"{self.rank_by}_ci_low", f"{self.rank_by}_ci_high",
                 "p_adjusted", "verdict", *[c for c in SHOWN_MEANS if c in self.overall]]
        singles = self.overall[self.overall["kind"] == "single"][shown]
        combinations = self.overall[self.overall["kind"] != "single"][shown]
        sections = [("Overall ranking", self.overall[shown])]
        if not self.calibrated.empty:
            sections.append(("LRCR and OPI-1 calibrated by people's labels (ranked by calibrated OPI-1; raw beside)",
                             self.calibrated))
        if not self.retrieval.empty:
            title = (f"Retrieval against gold evidence (value and {self.settings.config.confidence:.0%} interval; "
                     "tested against the best by nDCG)")
            sections.append((title, self._retrieval_section()))
        if len(singles) and len(combinations):
            sections += [("Single retrievers (the paper's Table 2)", singles),
                         ("Combinations (the paper's Table 4)", combinations)]
        if self.relation_tables:
            sections += [(f"{display(self.rank_by)} per relation", self.relation_tables[self.rank_by]),
                         ("BERTSim per relation", self.relation_tables["bertsim"]),
                         ("LRCR per relation", self.relation_tables["lrcr"])]
        sections.append(("Answer quality ranking (the paper's Table 3)", self.answer_quality))
        if self.relation_tables:
            sections.append(("Strengths and weaknesses: best configuration per relation", self.strengths))
        return sections

    def markdown(self) -> str:
        parts = ["# OPI sweep report", "", self.headline(), ""]
        if self.relation_tables:
            parts += ["![OPI per relation](heatmap.png)", ""]
        parts += ["![Metrics with intervals](bars.png)", ""]
        for title, table in self._sections():
            index = table.index.name is not None
            parts += [f"## {title}", "", table.to_markdown(index=index, floatfmt=".3f"), ""]
        return "\n".join(parts)

    def html(self) -> str:
        import html

        body = [f"<h1>OPI sweep report</h1><p>{html.escape(self.headline()).replace('**', '')}</p>"]
        if self.relation_tables:
            body.append('<img src="heatmap.png" alt="OPI per relation" style="max-width:100%">')
        body.append('<img src="bars.png" alt="Metrics with intervals" style="max-width:100%">')
        for title, table in self._sections():
            body.append(f"<h2>{html.escape(title)}</h2>")
            body.append(table.to_html(index=table.index.name is not None, float_format=lambda v: f"{v:.3f}",
                                      border=0, classes="table"))
        style = ("body{font-family:sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse}"
                 "td,th{padding:.2em .6em;border-bottom:1px solid #ddd;text-align:right}")
        return (f"<!doctype html><html><head><meta charset='utf-8'><title>OPI sweep report</title>"
                f"<style>{style}</style></head><body>{''.join(body)}</body></html>")


def build_report(configurations: Sequence[Configuration], relations: Sequence[str],
                 settings: ReportSettings | None = None) -> SweepReport:
    """The report for configurations evaluated on the same examples. Without gold relations in every
    configuration, the report ranks by BERTSim and has no relation tables."""
    s = settings or ReportSettings(ReportConfig())
    if not configurations:
        raise ValueError("a report needs at least one configuration")
    labelled = all(has_gold_relations(c.predictions) for c in configurations)
    key = beta_key(s.beta) if labelled else "bertsim"
    runs = paired_rows(configurations)
    rows, per_relation, metrics_of = [], [], {}
    for c in configurations:
        metrics, table = configuration_metrics(c.predictions, relations, [1.0], s.beta, s.config.confidence,
                                               s.config.resamples, s.seed)
        metrics_of[c.name] = metrics
        row = {"configuration": c.name, "kind": "bound" if c.bound else c.kind, "bound": c.bound,
               "n": len(c.predictions)}
        for name in dict.fromkeys(["bertsim", "lrcr", key] if labelled else ["bertsim"]):
            row.update({name: metrics[name], f"{name}_ci_low": metrics[f"{name}_ci_low"],
                        f"{name}_ci_high": metrics[f"{name}_ci_high"]})
        if labelled:
            row[f"{key}_mean"] = metrics[f"{key}_mean"]
        row.update({name: value for name, value in metrics.items() if name in SHOWN_MEANS or name in ANSWER_SCORES})
        rows.append(row)
        per_relation.append(table.assign(configuration=c.name))
    overall = pd.DataFrame(rows).sort_values(key, ascending=False, kind="stable").reset_index(drop=True)
    overall = _against_best(overall, runs, s, "opi" if labelled else "bertsim")
    overall = _between_bounds(overall, configurations, runs, s, "opi" if labelled else "bertsim")
    labels = {c.name: c.setup for c in configurations}
    retrieval = _retrieval(configurations, metrics_of, s)
    if not labelled:
        return SweepReport(overall, pd.DataFrame(), pd.DataFrame(), _answer_quality(overall), s, labels, key,
                           retrieval=retrieval)
    long = pd.concat(per_relation, ignore_index=True)[["configuration", "relation", "n", "bertsim", "lrcr", key]]
    order = overall["configuration"].tolist()
    relation_tables = {metric: long.pivot(index="relation", columns="configuration", values=metric)[order]
                       .reindex([r for r in relations if r in set(long["relation"])])
                       for metric in ("bertsim", "lrcr", key)}
    return SweepReport(overall, long, _strengths(runs, long, s), _answer_quality(overall), s, labels, key,
                       relation_tables, retrieval, _calibrated(configurations, metrics_of))


CALIBRATED = ["lrcr_calibrated", "lrcr_calibrated_ci_low", "lrcr_calibrated_ci_high", "opi_1_calibrated",
              "opi_1_calibrated_ci_low", "opi_1_calibrated_ci_high", "labels_used", "classifier_accuracy_vs_people"]


def _calibrated(configurations: Sequence[Configuration], metrics_of: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Raw beside calibrated LRCR and OPI-1, for the configurations people's labels calibrated, best first."""
    calibrated = {c.name: dict(c.calibrated) for c in configurations}
    rows = [{"configuration": name, "lrcr": metrics_of[name]["lrcr"], "opi_1": metrics_of[name]["opi_1"],
             **{metric: values.get(metric) for metric in CALIBRATED}}
            for name, values in calibrated.items() if values.get("lrcr_calibrated") is not None]
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).sort_values("opi_1_calibrated", ascending=False).reset_index(drop=True)


def paired_rows(configurations: Sequence[Configuration]) -> dict[str, pd.DataFrame]:
    """Each configuration's rows on the examples every configuration answered (an LLM's empty replies and
    refusals leave an example out of one of them): the paired tests compare like with like."""
    answered_by_all = set.intersection(*(set(answered(c.predictions)["id"]) for c in configurations))
    return {c.name: c.predictions[c.predictions["id"].isin(answered_by_all)].reset_index(drop=True)
            for c in configurations}


def _between_bounds(overall: pd.DataFrame, configurations: Sequence[Configuration], runs: dict[str, pd.DataFrame],
                    s: ReportSettings, metric: str) -> pd.DataFrame:
    """With one random (lower) and one oracle (upper) configuration in the sweep: each configuration's share of
    the gap between them closed, with its interval."""
    bounds = {c.bound: runs[c.name] for c in configurations if c.bound}
    if set(bounds) != {"lower", "upper"}:
        return overall
    closed = {c.name: gap_closed(runs[c.name], bounds["lower"], bounds["upper"], metric, s.beta,
                                 s.config.confidence, s.config.resamples, s.seed) for c in configurations}
    apart = compare(bounds["upper"], bounds["lower"], metric, s.beta, s.config.alpha, s.config.permutations, s.seed)
    return overall.assign(p_upper_vs_lower_bound=apart.p_value,
                          gap_closed=[closed[c].value for c in overall["configuration"]],
                          gap_closed_ci_low=[closed[c].low for c in overall["configuration"]],
                          gap_closed_ci_high=[closed[c].high for c in overall["configuration"]])


def _against_best(overall: pd.DataFrame, runs: dict[str, pd.DataFrame], s: ReportSettings, metric: str
                  ) -> pd.DataFrame:
    from scipy.stats import false_discovery_control

    """Each configuration against the best contender (bounds are reference points, never "best"): paired
    permutation p-values, Benjamini-Hochberg adjusted over all comparisons; verdict lower / higher / not
    distinguishable."""
    contenders = overall[overall["kind"] != "bound"]
    best = (contenders if len(contenders) else overall)["configuration"].iloc[0]
    others = [c for c in overall["configuration"] if c != best]
    tests = {c: compare(runs[best], runs[c], metric, s.beta, s.config.alpha, s.config.permutations, s.seed)
             for c in others}
    adjusted = dict(zip(others, false_discovery_control([tests[c].p_value for c in others]) if others else []))
    verdicts = {best: "best", **{c: "not distinguishable" if adjusted[c] >= s.config.alpha
                                 else "lower" if tests[c].difference > 0 else "higher" for c in others}}
    names = overall["configuration"]
    return overall.assign(p_vs_best=[tests[c].p_value if c in tests else np.nan for c in names],
                          p_adjusted=[adjusted.get(c, np.nan) for c in names],
                          verdict=[verdicts[c] for c in names])


def retrieval_ndcg(table: pd.DataFrame) -> str | None:
    """The retrieval table's nDCG column (the cut-off nearest 4), None when no configuration has a ranking."""
    return next((c for c in table.columns if c.startswith("ndcg_at_") and RANK_METRIC.fullmatch(c)), None)


def cut_off(metric: str) -> int:
    """recall_at_4 -> 4."""
    return int(metric.rsplit("_", 1)[1])


def with_interval(value: float, low: float, high: float) -> str:
    return "" if pd.isna(value) else f"{value:.3f} ({low:.3f}-{high:.3f})"


def _retrieval(configurations: Sequence[Configuration], metrics_of: dict[str, dict[str, float]], s: ReportSettings
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
        for name in shown:
            for column in (name, f"{name}_ci_low", f"{name}_ci_high"):
                row[column] = metrics.get(column, np.nan)
        rows.append(row)
    table = pd.DataFrame(rows)
    if not ndcg_ks:
        return table.assign(ndcg_p_value=np.nan, ndcg_p_adjusted=np.nan, ndcg_verdict=None, mrr_p_value=np.nan,
                            mrr_p_adjusted=np.nan, mrr_verdict=None, note=RECALL_ONLY)
    table = table.sort_values(shown[0], ascending=False, kind="stable", na_position="last").reset_index(drop=True)
    return _retrieval_against_best(table, _common_rows(measured), s, shown[0])


def _common_rows(configurations: Sequence[Configuration]) -> dict[str, pd.DataFrame]:
    """Each configuration's rows on the examples every one of them has (retrieval needs no answer)."""
    common = set.intersection(*(set(c.predictions["id"]) for c in configurations))
    return {c.name: c.predictions[c.predictions["id"].isin(common)].reset_index(drop=True) for c in configurations}


def _retrieval_against_best(table: pd.DataFrame, runs: dict[str, pd.DataFrame], s: ReportSettings, ndcg: str
                            ) -> pd.DataFrame:
    """The best contender by nDCG (bounds never), and every other ranked configuration but the oracle tested
    against it on nDCG and on MRR: paired permutation p-values, each metric's Benjamini-Hochberg adjusted over its
    comparisons as in ``_against_best``."""
    from scipy.stats import false_discovery_control

    ranked = table[table[ndcg].notna()]
    contenders = ranked[ranked["bound"].isna()]["configuration"].tolist()
    best = contenders[0] if contenders else None
    tested = [c for c, bound in zip(ranked["configuration"], ranked["bound"]) if c != best and bound != "upper"]
    names = table["configuration"]
    columns = {}
    for prefix, metric in (("ndcg", ndcg), ("mrr", "mrr")):
        tests = {c: compare_column(runs[best], runs[c], metric, s.config.alpha, s.config.permutations, s.seed)
                 for c in (tested if best else [])}
        adjusted = dict(zip(tests, false_discovery_control([t.p_value for t in tests.values()]) if tests else []))
        verdicts = {best: "best", **{c: "not distinguishable" if adjusted[c] >= s.config.alpha
                                     else "lower" if tests[c].difference > 0 else "higher" for c in tests}}
        columns.update({f"{prefix}_p_value": [tests[c].p_value if c in tests else np.nan for c in names],
                        f"{prefix}_p_adjusted": [adjusted.get(c, np.nan) for c in names],
                        f"{prefix}_verdict": [verdicts.get(c) for c in names]})
    notes = [PERFECT if bound == "upper" else RECALL_ONLY if pd.isna(value) else None
             for bound, value in zip(table["bound"], table[ndcg])]
    return table.assign(**columns, note=notes)


def _strengths(runs: dict[str, pd.DataFrame], long: pd.DataFrame, s: ReportSettings) -> pd.DataFrame:
    key = beta_key(s.beta)
    records = []
    for relation, group in long.groupby("relation", sort=False):
        ranked = group.sort_values(key, ascending=False, kind="stable")
        best = ranked.iloc[0]
        record = {"relation": relation, "n": int(best["n"]), "best": best["configuration"], key: best[key]}
        if len(ranked) > 1:
            second = ranked.iloc[1]
            of = {c: runs[c][runs[c]["relation"] == relation] for c in (best["configuration"], second["configuration"])}
            test = compare(of[best["configuration"]], of[second["configuration"]], "opi", s.beta, s.config.alpha,
                           s.config.permutations, s.seed)
            record.update({"runner_up": second["configuration"], "margin": best[key] - second[key],
                           "p_value": test.p_value,
                           "verdict": "ahead" if test.significant else "not distinguishable"})
        records.append(record)
    return pd.DataFrame(records)


def _answer_quality(overall: pd.DataFrame) -> pd.DataFrame:
    """Configurations ranked by BERTSim, with answer correctness and the judge where the runs have them."""
    table = overall[["configuration", *[c for c in ANSWER_SCORES if c in overall]]]
    table = table.sort_values("bertsim", ascending=False, kind="stable").reset_index(drop=True)
    for name in ANSWER_SCORES:
        if name in table:
            table[f"{name}_rank"] = table[name].rank(ascending=False, method="min").astype("Int64")  # none: <NA>
    return table


def plot_heatmap(table: pd.DataFrame, labels: dict[str, str], path: Path, metric: str = "opi_1") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    short = [labels.get(c, c) for c in table.columns]
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * len(short), 1.2 + 0.4 * len(table)))
    image = ax.imshow(table.to_numpy(dtype=float), cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(short)), short, rotation=45, ha="right")
    ax.set_yticks(range(len(table)), table.index)
    for (i, j), value in np.ndenumerate(table.to_numpy(dtype=float)):
        if not np.isnan(value):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if value < 0.5 else "black")
    fig.colorbar(image, ax=ax, label=display(metric))
    ax.set_title(f"{display(metric)} per relation and configuration")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_bars(overall: pd.DataFrame, labels: dict[str, str], metrics: Sequence[str], confidence: float,
              path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    short = [labels.get(c, c) for c in overall["configuration"]]
    fig, axes = plt.subplots(1, len(metrics), figsize=(max(3.0 * len(metrics), 0.45 * len(short) * len(metrics)),
                                                        3.8), sharey=False, squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        values = overall[metric].to_numpy()
        errors = np.vstack([values - overall[f"{metric}_ci_low"], overall[f"{metric}_ci_high"] - values])
        ax.bar(range(len(short)), values, yerr=errors, capsize=3, color="#4c72b0")
        ax.set_xticks(range(len(short)), short, rotation=60, ha="right", fontsize=8)
        ax.set_title(f"{display(metric)} ({confidence:.0%} interval)")
        ax.set_ylim(0, 1)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
