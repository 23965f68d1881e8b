import numpy as np
import pandas as pd

from opi.report import tables


def test_values_with_intervals_three_decimals_and_a_dash_for_what_is_missing():
    assert tables.interval(0.28512, 0.24449, 0.32351) == "0.285 [0.244, 0.324]"
    assert tables.interval(0.5, np.nan, np.nan) == "0.500" and tables.interval(np.nan, 0.1, 0.2) == "—"
    assert tables.interval(pd.NA, None, None) == "—" and tables.number(None) == "—"
    assert tables.share(0.5312, 0.4104, 0.6649) == "53% [41%, 66%]" and tables.share(np.nan) == "—"


def test_p_values_have_three_significant_digits_never_an_exponent():
    assert [tables.p_value(p) for p in (0.123456, 0.05, 1.0, 0.000123456, 0.0001, np.nan)] == [
        "0.123", "0.05", "1", "0.000123", "0.0001", "—"]


def test_a_cell_keeps_its_column_in_markdown():
    assert tables.escape("a|b") == "a\\|b" and tables.escape("two\nlines") == "two lines"
    table = pd.DataFrame({"configuration": ["x|y"], "OPI-1": ["0.1"]})
    assert tables.markdown_table(table) == "| configuration | OPI-1 |\n|:---|---:|\n| x\\|y | 0.1 |"
    assert tables.html_table(table) == ("<table><thead><tr><th class='left'>configuration</th>"
                                        "<th class='right'>OPI-1</th></tr></thead><tbody><tr><td class='left'>x|y</td>"
                                        "<td class='right'>0.1</td></tr></tbody></table>")


def test_the_ranking_shows_intervals_in_one_cell_and_the_best_without_a_p():
    overall = pd.DataFrame({"configuration": ["kNN | e", "BM25 | e"], "opi_1": [0.4, 0.3],
                            "opi_1_ci_low": [0.35, 0.25], "opi_1_ci_high": [0.45, 0.35], "p_adjusted": [np.nan, 0.0123],
                            "verdict": ["best", "lower"]})
    shown = tables.ranking(overall, {"kNN | e": "kNN", "BM25 | e": "BM25"}, ["opi_1"])
    assert shown.to_dict("records") == [
        {"#": "1", "configuration": "kNN", "OPI-1": "0.400 [0.350, 0.450]", "p (adj.)": "—", "vs best": "best"},
        {"#": "2", "configuration": "BM25", "OPI-1": "0.300 [0.250, 0.350]", "p (adj.)": "0.0123",
         "vs best": "lower"}]


def test_retrieval_verdicts_read_in_one_cell():
    assert tables.retrieval_verdict("lower", "lower", None) == "lower"
    assert tables.retrieval_verdict("not distinguishable", "lower", None) == "lower on MRR only"
    assert tables.retrieval_verdict("lower", "not distinguishable", None) == "lower on nDCG only"
    assert tables.retrieval_verdict(None, None, "unordered: recall only") == "unordered: recall only"
    assert tables.retrieval_verdict(None, None, None) == "—"


def test_the_oracles_retrieval_values_are_not_shown_and_the_bounds_come_last():
    table = pd.DataFrame({"configuration": ["Oracle", "kNN", "Random"], "kind": "single",
                          "bound": ["upper", None, "lower"], "n": [4, 4, 4], "ndcg_at_4": [0.997, 0.6, 0.2],
                          "ndcg_at_4_ci_low": [0.99, 0.5, 0.1], "ndcg_at_4_ci_high": [1.0, 0.7, 0.3],
                          "mrr": [1.0, 0.6, 0.2], "mrr_ci_low": [1.0, 0.5, 0.1], "mrr_ci_high": [1.0, 0.7, 0.3],
                          "recall_at_4": [1.0, 0.8, 0.3], "ndcg_p_adjusted": [np.nan, np.nan, 0.01],
                          "mrr_p_adjusted": [np.nan, np.nan, 0.02], "ndcg_verdict": [None, "best", "lower"],
                          "mrr_verdict": [None, "best", "lower"], "note": ["perfect by construction", None, None]})
    shown = tables.retrieval(table, {}, "ndcg_at_4")
    assert shown["configuration"].tolist() == ["kNN", "Oracle", "Random"]
    assert shown.iloc[1].tolist() == ["Oracle", "4", "—", "—", "—", "—", "—", "perfect by construction"]
    assert shown.iloc[2].tolist() == ["Random", "4", "0.200 [0.100, 0.300]", "0.200 [0.100, 0.300]", "0.300",
                                      "0.01", "0.02", "lower"]


def test_plain_tables_name_their_columns_for_people():
    table = pd.DataFrame({"configuration": ["a"], "bertsim": [0.51234], "bertsim_rank": pd.array([1], "Int64"),
                          "judge_mean": [np.nan], "judge_mean_rank": pd.array([None], "Int64")})
    assert tables.plain(table, {"a": "A"}).to_dict("records") == [
        {"configuration": "A", "BERTSim": "0.512", "BERTSim rank": "1", "judge": "—", "judge rank": "—"}]
