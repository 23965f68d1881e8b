"""The report's sections (``opi.report.sections``) on a report written by hand (``test_render.hand_report``): which
sections a report has and in what order (none empty), the ranking of the contenders only with its caption naming
the interval, the unit of inference and the gap closed where there are bounds, the bounds apart with the test of
upper against lower, the paper's two tables only where singles and combinations both ran, one table per relation
metric (contenders as columns, a metric named twice shown once), and the retrieval caption saying why the oracle's
values are hidden."""
import numpy as np
import pandas as pd

from opi.metrics.stats import Design
from opi.report import sections
from opi.report.base import PERFECT
from tests.opi.report.test_render import hand_report

CAPTION = ("Value [95% interval]. p: paired permutation test against the best, by article, Benjamini-Hochberg "
           "adjusted; vs best at α = 0.05.")
GAP = " Gap closed: share of the gap from the lower to the upper bound."


def retrieval_row(configuration, bound=None, note=None, ndcg=0.7, verdict="best"):
    return dict(configuration=configuration, bound=bound, note=note, n=400, ndcg_at_4=ndcg,
                ndcg_at_4_ci_low=ndcg - 0.05, ndcg_at_4_ci_high=ndcg + 0.05, mrr=0.6, mrr_ci_low=0.55,
                mrr_ci_high=0.65, recall_at_4=0.8, ndcg_p_adjusted=np.nan, mrr_p_adjusted=np.nan,
                ndcg_verdict=verdict, mrr_verdict=verdict)


def test_a_report_has_only_its_sections_that_hold_rows_in_order():
    report = hand_report()  # no retrieval, strengths, answer quality, relations, labels or diagnostics
    assert [title for title, _, _ in sections.every(report)] == ["Ranking", "Bounds"]
    report.retrieval = pd.DataFrame([retrieval_row("kNN")])
    assert [title for title, _, _ in sections.every(report)] == ["Ranking", "Bounds",
                                                                 "Retrieval against gold evidence"]
    assert [title for title, _, _ in sections.every(hand_report(bounds=False))] == ["Ranking"]


def test_the_ranking_holds_the_contenders_and_its_caption_says_the_unit_and_the_gap():
    report = hand_report()
    title, caption, table = sections.ranking(report)
    assert caption == CAPTION + GAP
    assert table["configuration"].tolist() == ["kNN", "A-Two", "EDI"]  # not Oracle, Random
    assert sections.ranking(report, compact=True)[2].columns.tolist() == [
        "#", "configuration", "OPI-1", "p (adj.)", "vs best", "gap closed"]  # the ranking metric alone
    report.design = Design("question", 52, 416, False)
    assert ", by question, " in sections.ranking(report)[1]
    report.design = None
    assert sections.unit_said(report) == "article"
    assert sections.ranking(hand_report(bounds=False))[1] == CAPTION  # no bounds: no gap


def test_the_bounds_are_their_own_section_with_the_test_of_upper_against_lower():
    assert sections.bounds(hand_report(bounds=False)) is None
    title, caption, table = sections.bounds(hand_report())
    assert caption == ("Reference points, not ranked: a random retriever (lower) and the gold evidence (upper). "
                       "Upper against lower bound: p = 0.0001.")
    assert table[["configuration", "bound"]].values.tolist() == [["Oracle", "upper bound"],
                                                                 ["Random", "lower bound"]]


def test_the_papers_tables_only_where_singles_and_combinations_both_ran():
    report = hand_report()
    assert sections.paper_tables(report) == []  # singles only
    report.overall.loc[report.overall["configuration"] == "A-Two", "kind"] = "A-"
    (single, single_caption, singles), (combined, _, combinations) = sections.paper_tables(report)
    assert (single, combined) == ("Single retrievers (the paper's Table 2)", "Combinations (the paper's Table 4)")
    assert singles["configuration"].tolist() == ["kNN", "EDI"] and singles["#"].tolist() == ["1", "2"]
    assert combinations["configuration"].tolist() == ["A-Two"] and single_caption == ""


def test_one_table_per_relation_metric_with_the_contenders_as_columns():
    report = hand_report()
    by_relation = pd.DataFrame({"kNN": [0.41, 0.2], "A-Two": [0.3, 0.5], "EDI": [0.1, 0.25], "Oracle": [0.9, 0.9]},
                               index=["causal", "temporal"])
    report.relation_tables = {"lrcr": by_relation, "opi_1": by_relation}
    shown = sections.per_relation(report)
    assert [title for title, _, _ in shown] == ["OPI-1 per relation", "LRCR per relation"]  # rank_by first
    assert shown[0][2].values.tolist() == [["causal", "0.410", "0.300", "0.100"],
                                           ["temporal", "0.200", "0.500", "0.250"]]
    report.rank_by, report.relation_tables = "bertsim", {"bertsim": by_relation}
    assert [title for title, _, _ in sections.per_relation(report)] == ["BERTSim per relation"]  # once


def test_the_retrieval_caption_says_why_the_oracles_values_are_hidden():
    report = hand_report()
    report.retrieval = pd.DataFrame([retrieval_row("kNN")])
    caption = sections.retrieval(report)[1]
    assert "p: against the best by nDCG@4, Benjamini-Hochberg adjusted." in caption and "oracle" not in caption
    report.retrieval = pd.DataFrame([retrieval_row("kNN"), retrieval_row("Oracle", "upper", PERFECT, 0.97, None)])
    caption, table = sections.retrieval(report)[1:]
    assert "The oracle ranks the fewest chunks that hold the gold evidence: perfect by construction" in caption
    assert table.loc[1, ["nDCG@4", "recall@4", "vs best"]].tolist() == ["—", "—", PERFECT]
