"""The report's sections in order: (title, caption, table as shown). The paper's tables hold the contenders only;
the random and oracle bounds have their own section."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from opi.metrics.names import BERTSIM, LRCR
from opi.report import tables
from opi.report.base import PERFECT, display
from opi.report.statistics import retrieval_ndcg

if TYPE_CHECKING:
    from opi.report.report import SweepReport

Section = tuple[str, str, pd.DataFrame]


def every(report: SweepReport) -> list[Section]:
    found = [ranking(report), bounds(report), retrieval(report), strengths(report), *paper_tables(report),
             answer_quality(report), *per_relation(report), calibrated(report), diagnostics(report)]
    return [section for section in found if section is not None and not section[2].empty]


def unit_said(report: SweepReport) -> str:
    return "article" if report.design is None or report.design.unit == "article" else "question"


def ranking(report: SweepReport, compact: bool = False, kinds: tuple[str, ...] = ()) -> Section:
    """The contenders ranked (of ``kinds`` only, when given); compact: the ranking metric alone."""
    o, s = report.overall, report.settings.config
    rows = o[(o["kind"] != "bound") & (o["kind"].isin(kinds) if kinds else True)]
    table = tables.ranking(rows, report.labels, [report.rank_by] if compact else report.metrics)
    caption = (f"Value [{s.confidence:.0%} interval]. p: paired permutation test against the best, by "
               f"{unit_said(report)}, Benjamini-Hochberg adjusted; vs best at α = {s.alpha}."
               + (" Gap closed: share of the gap from the lower to the upper bound." if "gap_closed" in o else ""))
    return "Ranking", caption, table


def bounds(report: SweepReport) -> Section | None:
    o = report.overall
    if not (o["kind"] == "bound").any():
        return None
    caption = "Reference points, not ranked: a random retriever (lower) and the gold evidence (upper)."
    if "p_upper_vs_lower_bound" in o:
        caption += (f" Upper against lower bound: p = "
                    f"{tables.p_value(o['p_upper_vs_lower_bound'].iloc[0])}.")
    return "Bounds", caption, tables.bounds(o, report.labels, report.metrics)


def retrieval(report: SweepReport) -> Section | None:
    t = report.retrieval
    if t.empty:
        return None
    ndcg = retrieval_ndcg(t)
    by = display(ndcg) if ndcg else "nDCG"
    caption = (f"Against the gold evidence, over the examples that have it. Value "
               f"[{report.settings.config.confidence:.0%} interval]; recall's intervals in retrieval.csv. p: against "
               f"the best by {by}, Benjamini-Hochberg adjusted.")
    if (t["note"] == PERFECT).any():
        caption += (" The oracle ranks the fewest chunks that hold the gold evidence: perfect by construction, so its "
                    "values are not shown (measured, its nDCG and recall fall short of 1 because they count every "
                    "chunk holding an evidence piece, and overlapping chunks hold the same piece; see retrieval.csv).")
    return "Retrieval against gold evidence", caption, tables.retrieval(t, report.labels, ndcg)


def strengths(report: SweepReport) -> Section | None:
    if report.strengths.empty:
        return None
    caption = ("Contenders only. p: paired permutation test of the best against the runner-up on the relation's "
               "examples, Benjamini-Hochberg adjusted over the relations.")
    return ("Strengths and weaknesses: best configuration per relation", caption,
            tables.strengths(report.strengths, report.labels, report.rank_by))


def paper_tables(report: SweepReport) -> list[Section]:
    o = report.overall[report.overall["kind"] != "bound"]
    singles, combinations = (o["kind"] == "single"), (o["kind"] != "single")
    if not (singles.any() and combinations.any()):
        return []
    kinds = tuple(o.loc[combinations, "kind"].unique())
    return [("Single retrievers (the paper's Table 2)", "", ranking(report, kinds=("single",))[2]),
            ("Combinations (the paper's Table 4)", "", ranking(report, kinds=kinds)[2])]


def answer_quality(report: SweepReport) -> Section:
    return ("Answer quality ranking (the paper's Table 3)", "",
            tables.plain(report.answer_quality, report.labels))


def per_relation(report: SweepReport) -> list[Section]:
    contenders = report.overall.loc[report.overall["kind"] != "bound", "configuration"].tolist()
    return [(f"{display(metric)} per relation", "", tables.per_relation(report.relation_tables[metric],
                                                                        report.labels, contenders))
            for metric in dict.fromkeys([report.rank_by, BERTSIM, LRCR]) if metric in report.relation_tables]


def calibrated(report: SweepReport) -> Section | None:
    if report.calibrated.empty:
        return None
    return ("LRCR and OPI-1 calibrated by people's labels (ranked by calibrated OPI-1; raw beside)", "",
            tables.plain(report.calibrated, report.labels))


def diagnostics(report: SweepReport) -> Section | None:
    table = tables.diagnostics(report.overall, report.labels)
    return ("Retrieval diagnostics (means)", "", table) if not table.empty else None
