import numpy as np
import pandas as pd
import pytest

from opi.metrics.stats import compare
from opi.report import Configuration, ReportSettings
from opi.report import statistics, tables
from opi.schemas import ReportConfig

S = ReportSettings(ReportConfig(resamples=200, permutations=999))


def test_benjamini_hochberg_by_hand():
    # sorted 0.01, 0.03, 0.04 of 3: 0.01*3/1 = 0.03, 0.03*3/2 = 0.045, 0.04*3/3 = 0.04; from the top min(0.045, 0.04)
    assert statistics.adjusted([0.03, 0.01, 0.04]) == pytest.approx([0.04, 0.03, 0.04])
    assert statistics.adjusted([]) == []


def test_a_verdict_reads_the_adjusted_p_and_the_sign():
    assert statistics.verdict(0.01, 0.2, 0.05) == "lower" and statistics.verdict(0.01, -0.2, 0.05) == "higher"
    assert statistics.verdict(0.05, 0.2, 0.05) == "not distinguishable"


def rows(similarity: list[float], correct: list[bool], relation=("a", "a", "b", "b")) -> pd.DataFrame:
    relation = list(relation)
    return pd.DataFrame({"id": [f"e{i}" for i in range(len(relation))], "relation": relation,
                         "predicted_relation": [r if c else "x" for r, c in zip(relation, correct)],
                         "similarity": similarity, "cluster": [f"g{i // 2}" for i in range(len(relation))]})


def test_paired_rows_leave_out_an_example_one_configuration_did_not_answer():
    x = rows([0.5] * 4, [True] * 4).assign(generated_answer=["a", None, "c", "d"])
    y = rows([0.6] * 4, [True] * 4).assign(generated_answer="z")
    paired = statistics.paired_rows([Configuration("x", "single", "x", x), Configuration("y", "single", "y", y)])
    assert paired["x"]["id"].tolist() == paired["y"]["id"].tolist() == ["e0", "e2", "e3"]


def test_the_bounds_are_adjusted_apart_from_the_contenders():
    rng = np.random.default_rng(0)
    frames = {name: rows(list(np.clip(rng.normal(level, 0.1, 40), 0, 1)), list(rng.random(40) < level),
                         relation=["a", "b"] * 20)
              for name, level in (("best", 0.7), ("two", 0.6), ("three", 0.5), ("Random", 0.1), ("Oracle", 0.95))}
    overall = pd.DataFrame({"configuration": list(frames), "kind": ["single"] * 3 + ["bound"] * 2,
                            "opi_1": [0.7, 0.6, 0.5, 0.1, 0.95]}).sort_values("opi_1", ascending=False)
    tested = statistics.against_best(overall, frames, S, "opi").set_index("configuration")
    p = {c: compare(frames["best"], frames[c], "opi", 1.0, 0.05, 999, 0, "article").p_value
         for c in ("two", "three", "Random", "Oracle")}
    assert tested.loc[["two", "three"], "p_adjusted"].tolist() == pytest.approx(statistics.adjusted([p["two"],
                                                                                                    p["three"]]))
    assert tested.loc[["Random", "Oracle"], "p_adjusted"].tolist() == pytest.approx(
        statistics.adjusted([p["Random"], p["Oracle"]]))
    assert tested.loc["best", "verdict"] == "best" and pd.isna(tested.loc["best", "p_vs_best"])


def test_strengths_are_over_contenders_with_p_adjusted_over_the_relations():
    frames = {"X": rows([0.9, 0.5, 0.6, 0.2], [True, False, True, False]),
              "Y": rows([0.8, 0.8, 0.4, 0.4], [True, True, True, True]),
              "Oracle": rows([1.0, 1.0, 1.0, 1.0], [True] * 4)}
    long = pd.DataFrame({"configuration": ["X", "X", "Y", "Y", "Oracle", "Oracle"], "relation": ["a", "b"] * 3,
                         "n": [2] * 6, "opi_1": [0.58, 0.44, 0.89, 0.57, 1.0, 1.0]})
    table = statistics.strengths(frames, long, S, ["X", "Y"]).set_index("relation")
    assert table["best"].tolist() == ["Y", "Y"] and table["runner_up"].tolist() == ["X", "X"]
    assert table["margin"].tolist() == pytest.approx([0.31, 0.13])
    assert table["p_adjusted"].tolist() == pytest.approx(statistics.adjusted(table["p_value"].tolist()))
    assert set(table["verdict"]) == {"not distinguishable"}  # one article per relation: nothing can be shown
    assert table["tied"].tolist() == [0, 0]


def test_a_relation_s_best_counts_those_as_good_as_it():
    frames = {name: rows([0.5] * 4, [True] * 4) for name in "XYZ"}
    long = pd.DataFrame({"configuration": list("XXYYZZ"), "relation": ["a", "b"] * 3, "n": [2] * 6,
                         "opi_1": [0.6, 0.3, 0.6, 0.5, 0.6, 0.4]})
    table = statistics.strengths(frames, long, S, ["X", "Y", "Z"]).set_index("relation")
    assert table["tied"].tolist() == [2, 0] and table["best"].tolist() == ["X", "Y"]
    shown = tables.strengths(table.reset_index(), {}, "opi_1")
    assert shown["best"].tolist() == ["X", "Y"] and shown["tied"].tolist() == ["2", "0"]


def test_answer_quality_ranks_contenders_by_bertsim():
    overall = pd.DataFrame({"configuration": ["a", "b", "Oracle"], "kind": ["single", "A-", "bound"],
                            "bertsim": [0.4, 0.5, 0.9]})
    table = statistics.answer_quality(overall)
    assert table["configuration"].tolist() == ["b", "a"] and table["bertsim_rank"].tolist() == [1, 2]
