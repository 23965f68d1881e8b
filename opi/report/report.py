"""The sweep report: ``build_report`` computes it from the configurations' per-example rows, ``SweepReport`` holds
its tables and writes them (csv), its figures (png) and the report itself (Markdown and self-contained HTML)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import pandas as pd

from opi.metrics.configuration import has_gold_relations
from opi.metrics.names import BERTSIM, LRCR
from opi.metrics.opi import beta_key
from opi.metrics.stats import Design
from opi.report import plots, render, statistics
from opi.report.base import Configuration, ReportSettings, labels_of
from opi.schemas import ReportConfig


@dataclass
class SweepReport:
    overall: pd.DataFrame  # every configuration, bounds included, best first (overall.csv)
    per_relation: pd.DataFrame
    strengths: pd.DataFrame
    answer_quality: pd.DataFrame
    settings: ReportSettings
    labels: dict[str, str]  # configuration -> its name in the report (short: opi.naming)
    rank_by: str  # the metric configurations are ranked and tested on: opi_<β>, or bertsim without gold relations
    relation_tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    retrieval: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty: the runs have no retrieval metrics
    calibrated: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty: no people's labels imported
    design: Design | None = None  # the unit of inference and the numbers of clusters and examples

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by its csv name (configurations by the names they were given, short names beside)."""
        named = {"overall": self.overall, "per_relation": self.per_relation, "strengths": self.strengths,
                 "answer_quality": self.answer_quality, "retrieval": self.retrieval, "calibrated": self.calibrated}
        named = {name: table.assign(short_name=table["configuration"].map(self.labels))
                 if "configuration" in table else table for name, table in named.items()}
        return {**named, **{f"relation_{name}": table for name, table in self.relation_tables.items()}}

    def figures(self) -> dict[str, bytes]:
        images = {"bars.png": plots.intervals(self.overall, self.labels, self.metrics, self.settings.config.confidence)}
        if self.relation_tables:
            contenders = self.overall.loc[self.overall["kind"] != "bound", "configuration"].tolist()
            images["heatmap.png"] = plots.heatmap(self.relation_tables[self.rank_by][contenders], self.labels,
                                                  self.rank_by)
        return images

    def write(self, folder: str | Path, images: dict[str, bytes] | None = None) -> list[Path]:
        """Tables, figures (``images``: ``figures()`` drawn before), report.md and report.html in ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, table in self.tables().items():
            if table.empty:  # no relations, no relation tables: no empty file either
                continue
            paths.append(folder / f"{name}.csv")
            table.to_csv(paths[-1], index=name.startswith("relation_"))
        images = self.figures() if images is None else images
        for name, image in images.items():
            paths.append(folder / name)
            paths[-1].write_bytes(image)
        (folder / "report.md").write_text(self.markdown())
        (folder / "report.html").write_text(self.html(images))
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
        return list(dict.fromkeys([self.rank_by, BERTSIM, LRCR])) if self.relation_tables else [BERTSIM]

    def verdict(self) -> list[str]:
        """The decision, then one line per headline metric (Markdown)."""
        return render.verdict(self)

    def headline(self) -> str:
        """The verdict as one plain text (a log line)."""
        return " ".join(self.verdict()).replace("**", "")

    def markdown(self) -> str:
        return render.markdown(self)

    def html(self, images: dict[str, bytes] | None = None) -> str:
        return render.html_page(self, self.figures() if images is None else images)

    def summary_markdown(self) -> str:
        """The verdict and the ranking table with intervals, in Markdown MLflow renders: the parent run's
        description."""
        return render.summary_markdown(self)


def build_report(configurations: Sequence[Configuration], relations: Sequence[str],
                 settings: ReportSettings | None = None) -> SweepReport:
    """The report for configurations evaluated on the same examples. Without gold relations in every
    configuration, the report ranks by BERTSim and has no relation tables."""
    s = settings or ReportSettings(ReportConfig())
    if not configurations:
        raise ValueError("a report needs at least one configuration")
    labelled = all(has_gold_relations(c.predictions) for c in configurations)
    key, tested = (beta_key(s.beta), "opi") if labelled else (BERTSIM, BERTSIM)
    labels, fixed = labels_of(configurations, s.fixed)
    s = s if fixed == s.fixed else dataclasses.replace(s, fixed=fixed)
    runs = statistics.paired_rows(configurations)
    overall, long, metrics_of = statistics.overall_rows(configurations, relations, s, key, labelled)
    overall = statistics.against_best(overall, runs, s, tested)
    overall = statistics.between_bounds(overall, configurations, runs, s, tested)
    parts = dict(settings=s, labels=labels, rank_by=key, retrieval=statistics.retrieval(configurations, metrics_of, s),
                 design=statistics.sweep_design(runs, s.config.unit))
    if not labelled:
        return SweepReport(overall, pd.DataFrame(), pd.DataFrame(), statistics.answer_quality(overall), **parts)
    long = long[["configuration", "relation", "n", BERTSIM, LRCR, key]]
    contenders = overall.loc[overall["kind"] != "bound", "configuration"].tolist()
    return SweepReport(overall, long, statistics.strengths(runs, long, s, contenders),
                       statistics.answer_quality(overall), **parts,
                       relation_tables=statistics.relation_tables(long, overall["configuration"], relations,
                                                                  dict.fromkeys([BERTSIM, LRCR, key])),
                       calibrated=statistics.calibrated(configurations, metrics_of))
