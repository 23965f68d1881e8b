import numpy as np
import pandas as pd
import pytest

from opi.metrics.opi import summary
from opi.metrics.stats import (ClusterSums, Interval, Scorer, cluster_weights, column_interval, compare,
                               compare_column, confidence_intervals)
from tests.helpers.synthetic import prediction_rows

RELATIONS = ["direct_matching", "deductive", "fuzzy"]


def synthetic(n_per_relation: int, similarity: float, accuracy: float, seed: int) -> pd.DataFrame:
    return prediction_rows(n_per_relation, similarity, accuracy, seed, RELATIONS)


def test_scorer_on_the_data_itself_equals_the_summary():
    rows = synthetic(7, 0.6, 0.4, seed=1).iloc[:-2]  # uneven relations
    expected, _ = summary(rows, RELATIONS, (1.0, 2.0))
    identity = np.ones(len(rows))  # every example once
    assert Scorer(rows)(identity, "bertsim") == pytest.approx(expected["bertsim"])
    assert Scorer(rows)(identity, "lrcr") == pytest.approx(expected["lrcr"])
    assert Scorer(rows)(identity, "opi") == pytest.approx(expected["opi_1"])
    assert Scorer(rows, beta=2.0)(identity, "opi") == pytest.approx(expected["opi_2"])


def test_interval_is_zero_width_when_every_example_scores_the_same():
    rows = pd.DataFrame({"id": ["a", "b", "c", "d"], "relation": ["deductive", "deductive", "fuzzy", "fuzzy"],
                         "predicted_relation": ["deductive", "fuzzy", "fuzzy", "deductive"], "similarity": [0.5] * 4})
    intervals = confidence_intervals(rows, resamples=200)
    assert (intervals["bertsim"].low, intervals["bertsim"].high) == pytest.approx((0.5, 0.5))
    assert intervals["lrcr"].value == pytest.approx(0.5)  # one right in each relation
    assert intervals["opi_1"].value == pytest.approx(0.5)  # OPI-1 of B=0.5, L=0.5
    assert intervals["lrcr"].low <= 0.5 <= intervals["lrcr"].high and intervals["lrcr"].high > intervals["lrcr"].low


def test_intervals_hold_the_estimate_and_shrink_as_examples_grow():
    widths = []
    for n in (10, 40, 160):
        intervals = confidence_intervals(synthetic(n, 0.6, 0.4, seed=n), resamples=1000, seed=0)
        for interval in intervals.values():
            assert interval.low <= interval.value <= interval.high
        widths.append(intervals["opi_1"].high - intervals["opi_1"].low)
    assert widths[0] > widths[1] > widths[2]
    assert widths[0] / widths[2] == pytest.approx(4, rel=0.35)  # ~ 1/sqrt(n): 16x the data, 1/4 the width


def test_a_large_difference_is_significant_and_identical_distributions_are_not():
    good, bad = synthetic(20, 0.8, 0.7, seed=1), synthetic(20, 0.4, 0.2, seed=2)
    result = compare(good, bad, "opi", resamples=2000)
    assert result.significant and result.verdict == "higher" and result.p_value < 0.001
    assert compare(bad, good, "lrcr", resamples=2000).verdict == "lower"

    twin = synthetic(20, 0.8, 0.7, seed=3)  # same distribution as good, different draw
    result = compare(good, twin, "opi", resamples=2000)
    assert not result.significant and result.verdict == "not distinguishable"


def test_identical_results_differ_by_zero_and_order_of_rows_does_not_matter():
    rows = synthetic(5, 0.6, 0.5, seed=4)
    same = compare(rows, rows.iloc[::-1].reset_index(drop=True), "bertsim", resamples=500)
    assert same.difference == pytest.approx(0) and same.p_value == pytest.approx(1) and not same.significant
    with pytest.raises(ValueError, match="same examples"):
        compare(rows, rows.iloc[1:], "bertsim")


def test_a_single_pair_is_never_significant():
    rows = synthetic(1, 0.6, 0.5, seed=5).iloc[:1]
    other = rows.assign(similarity=0.0)
    result = compare(rows, other, "bertsim")
    assert result.difference == pytest.approx(rows["similarity"].item()) and not result.significant


def test_share_of_the_gap_closed_between_bounds():
    from opi.metrics.stats import gap_closed

    def rows(similarities):
        n = len(similarities)
        return pd.DataFrame({"id": [f"e{i}" for i in range(n)], "relation": ["fuzzy"] * n,
                             "predicted_relation": ["fuzzy"] * n, "similarity": similarities})

    x, low, high = rows([0.6, 0.6, 0.6, 0.6]), rows([0.4, 0.4, 0.4, 0.4]), rows([0.8, 0.8, 0.8, 0.8])
    closed = gap_closed(x, low, high, "bertsim", resamples=200)
    assert closed.value == pytest.approx(0.5) and closed.low == pytest.approx(0.5) and closed.high == pytest.approx(0.5)
    varied = gap_closed(rows([0.5, 0.7, 0.6, 0.6]), low, high, "bertsim", resamples=500, seed=1)
    assert varied.value == pytest.approx(0.5) and varied.low < 0.5 < varied.high
    no_gap = gap_closed(x, low, low, "bertsim", resamples=100)  # bounds that do not differ place nothing
    assert np.isnan(no_gap.value) and np.isnan(no_gap.low)


def test_examples_of_their_own_are_drawn_within_their_relation():
    data = ClusterSums({"v": np.zeros(5)}, np.array(["a", "b", "a", "b", "b"]), np.arange(5))
    (weights,) = cluster_weights(data, resamples=300, seed=0)
    assert weights.shape == (300, 5) and data.nested
    assert (weights[:, [0, 2]].sum(axis=1) == 2).all() and (weights[:, [1, 3, 4]].sum(axis=1) == 3).all()
    assert (next(cluster_weights(data, 300, 0)) == weights).all()  # seeded


def test_the_scorer_weighs_relations_equally_in_opi_and_examples_equally_in_bertsim():
    rows = pd.DataFrame({"relation": ["a", "a", "a", "b"], "predicted_relation": ["a", "a", "a", "x"],
                         "similarity": [0.9, 0.9, 0.9, 0.1]})
    identity = np.ones(4)
    assert Scorer(rows)(identity, "bertsim") == pytest.approx(0.7)  # (3 * 0.9 + 0.1) / 4
    assert Scorer(rows)(identity, "lrcr") == pytest.approx(0.75)
    # per relation: a B 0.9 L 1, b B 0.1 L 0; Formula (3): OPI-1 of B 0.5, L 0.5 = 0.5
    assert Scorer(rows)(identity, "opi") == pytest.approx(0.5)


def test_rows_whose_missing_relations_are_nan_are_one_stratum():
    rows = pd.DataFrame({"id": ["a", "b", "c", "d"], "relation": [np.nan] * 4, "predicted_relation": ["x"] * 4,
                         "similarity": [0.9, 0.1, 0.5, 0.5]})
    (interval,) = confidence_intervals(rows, resamples=200, metrics=("bertsim",)).values()
    assert interval.value == pytest.approx(0.5) and 0.1 <= interval.low <= 0.5 <= interval.high <= 0.9


def column_rows(values, relations=None) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame({"id": [f"e{i}" for i in range(n)], "relation": relations or ["fuzzy"] * n,
                         "ndcg_at_4": pd.array(values, dtype="Float64")})


def test_a_column_mean_and_its_interval_leave_missing_values_out():
    from opi.metrics.stats import column_interval, mean_of

    data = ClusterSums({"v": np.array([0.2, 0.4, np.nan, 0.9])}, None, np.arange(4))
    weights = np.array([[1, 1, 1, 1], [0, 0, 1, 3], [2, 1, 1, 0]])  # how often each example is drawn
    assert mean_of(*data.totals(weights, "v")) == pytest.approx([0.5, 0.9, 0.8 / 3])  # the NaN counts nowhere
    rows = column_rows([1.0, None, 0.5, 0.0], relations=["a", "a", "b", "b"])
    interval = column_interval(rows, "ndcg_at_4", resamples=500)
    # over the three with values: (1.0 + 0.5 + 0.0) / 3 = 0.5; within relations a draws only 1.0, so every
    # resample mean is (1.0 + two draws of {0.5, 0.0}) / 3, between 1/3 and 2/3
    assert interval.value == pytest.approx(0.5) and 1 / 3 <= interval.low <= 0.5 <= interval.high <= 2 / 3
    assert column_interval(column_rows([None, None]), "ndcg_at_4") is None


def test_a_paired_column_test_finds_a_clear_difference_and_not_noise():
    from opi.metrics.stats import compare_column

    rng = np.random.default_rng(0)
    good = column_rows(list(np.clip(rng.normal(0.8, 0.1, 40), 0, 1)))
    bad = column_rows(list(np.clip(rng.normal(0.3, 0.1, 40), 0, 1)))
    twin = column_rows(list(np.clip(rng.normal(0.8, 0.1, 40), 0, 1)))
    clear = compare_column(good, bad, "ndcg_at_4", resamples=2000)
    assert clear.significant and clear.verdict == "higher" and clear.p_value < 0.001
    assert clear.difference == pytest.approx(good["ndcg_at_4"].mean() - bad["ndcg_at_4"].mean())
    noise = compare_column(good, twin, "ndcg_at_4", resamples=2000)
    assert not noise.significant and noise.verdict == "not distinguishable"


def test_a_paired_column_test_leaves_out_pairs_missing_a_value():
    from opi.metrics.stats import compare_column

    first = column_rows([0.9, None, 0.7, 0.5])
    second = column_rows([0.1, 0.2, None, 0.5]).iloc[::-1].reset_index(drop=True)  # any order: paired by id
    result = compare_column(first, second, "ndcg_at_4", resamples=500)
    assert result.difference == pytest.approx((0.9 + 0.5) / 2 - (0.1 + 0.5) / 2)  # e0 and e3 only: 0.4
    single = compare_column(column_rows([0.9, None]), column_rows([0.1, 0.3]), "ndcg_at_4")
    assert single.difference == pytest.approx(0.8) and not single.significant


def clustered(values, clusters, relations=None) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame({"id": [f"e{i}" for i in range(n)], "cluster": clusters,
                         "relation": relations or ["fuzzy"] * n, "ndcg_at_4": values})


def test_cluster_codes_and_the_design_the_report_states():
    from opi.metrics.stats import cluster_codes, design

    rows = clustered([0.1] * 5, ["x", "y", "x", None, "z"], ["a", "b", "a", "a", "b"])
    assert list(cluster_codes(rows)) == [0, 1, 0, 2, 3]  # a row without a cluster is one of its own
    assert list(cluster_codes(rows, "example")) == [0, 1, 2, 3, 4]
    assert list(cluster_codes(rows.drop(columns="cluster"))) == [0, 1, 2, 3, 4]  # rows of earlier versions
    by_article = design(rows)
    assert (by_article.unit, by_article.clusters, by_article.examples, by_article.nested) == ("article", 4, 5, True)
    assert by_article.describe() == "4 articles, 5 questions"
    assert by_article.warning.startswith("only 4 articles")
    assert design(rows, "example").describe() == "5 questions, each its own unit" and design(rows, "example").warning is None
    assert not design(rows.assign(relation=["a", "b", "b", "a", "b"])).nested  # article x mixes relations
    with pytest.raises(ValueError, match="unit"):
        cluster_codes(rows, "question")


def test_a_cluster_bootstrap_draws_whole_articles():
    # article A: 30 questions at 0.2, article B: 10 at 0.8. Two articles drawn with replacement: AA (1/4) mean
    # 0.2, AB (1/2) mean (6 + 8) / 40 = 0.35, BB (1/4) mean 0.8; the 95 % interval spans 0.2 to 0.8
    rows = clustered([0.2] * 30 + [0.8] * 10, ["A"] * 30 + ["B"] * 10)
    by_article = column_interval(rows, "ndcg_at_4", resamples=4000, seed=1)
    assert by_article == Interval(pytest.approx(0.35), pytest.approx(0.2), pytest.approx(0.8))
    by_question = column_interval(rows, "ndcg_at_4", resamples=4000, seed=1, unit="example")
    assert by_question.high - by_question.low < by_article.high - by_article.low


def test_articles_that_mix_relations_are_drawn_whole_without_strata():
    data = ClusterSums({"v": np.zeros(6)}, np.array(["a", "b", "a", "b", "a", "b"]), np.array([0, 0, 1, 1, 2, 2]))
    (weights,) = cluster_weights(data, resamples=500, seed=0)
    assert not data.nested and weights.shape == (500, 3) and (weights.sum(axis=1) == 3).all()
    assert (weights == 3).any()  # one article drawn three times: no stratum held it back


def test_signs_flipped_per_article_not_per_question():
    # 6 articles x 10 questions, the first configuration ahead on every question: per question the difference is
    # overwhelming, per article an exact sign-flip test over 2^6 flips gives p = 2/64 (all + or all -)
    rng = np.random.default_rng(0)
    clusters = np.repeat([f"a{g}" for g in range(6)], 10)
    ahead = rng.uniform(0.5, 1.0, 60)
    first, second = clustered(list(ahead), list(clusters)), clustered(list(ahead - 0.3), list(clusters))
    by_article = compare_column(first, second, "ndcg_at_4", resamples=9999)
    assert by_article.p_value == pytest.approx(2 / 64) and by_article.difference == pytest.approx(0.3)
    assert compare_column(first, second, "ndcg_at_4", resamples=9999, unit="example").p_value < 0.001
    opi_rows = [pd.DataFrame({"id": f["id"], "cluster": f["cluster"], "relation": "fuzzy",
                              "predicted_relation": "fuzzy", "similarity": f["ndcg_at_4"]}) for f in (first, second)]
    assert compare(*opi_rows, "bertsim", resamples=9999).p_value == pytest.approx(2 / 64)


def test_by_article_intervals_cover_and_tests_hold_their_level_where_per_question_ones_do_not():
    from tests.helpers.clustered import simulate

    result = simulate(40, seed=3, resamples=500, permutations=499)  # benchmarks/cluster_inference.py: 1,000
    assert result.coverage["article"] > result.coverage["example"] + 0.1
    assert result.false_positives["article"] < result.false_positives["example"]
    assert result.widths["article"] > 1.3 * result.widths["example"]


@pytest.mark.slow
def test_by_article_intervals_cover_95_percent_in_a_simulation():
    from tests.helpers.clustered import simulate

    result = simulate(300, seed=11, resamples=1000, permutations=999)
    assert 0.91 <= result.coverage["article"] <= 0.99 and result.coverage["example"] < 0.85
    assert result.false_positives["article"] <= 0.08 and result.false_positives["example"] > 0.15
