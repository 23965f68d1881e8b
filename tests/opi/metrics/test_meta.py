"""opi.metrics.meta: does a metric agree with people? Rank agreement of configurations, per-example correlation,
absolute difference and score brackets on [0, 1], checked by hand on tests/helpers/scores.py."""
import numpy as np
import pandas as pd
import pytest

from opi.metrics.meta import (agreement_table, average_absolute_difference, bracket_accuracy, pearson, places,
                              rank_agreement, to_unit)
from tests.helpers.scores import scored


def configuration_means(scores: pd.DataFrame, column: str) -> pd.Series:
    return scores.groupby("configuration")[column].mean().sort_values(ascending=False, kind="stable")


def test_meta_evaluation_by_hand():
    human = scored()
    by_people = configuration_means(human, "score")    # A 7, C 5, B 1.5
    by_metric = configuration_means(human, "metric")   # A .85, B .70, C .65
    assert list(by_people.index) == ["A", "C", "B"] and list(by_metric.index) == ["A", "B", "C"]
    agreement = rank_agreement(by_people, by_metric)
    assert agreement["spearman"] == pytest.approx(1 - 6 * (0 + 1 + 1) / (3 * (9 - 1)))  # 0.5
    assert agreement["kendall"] == pytest.approx((2 - 1) / 3)  # A-B, A-C concordant; B-C discordant

    people = to_unit(human["score"], 7)
    # |1-.9| + |1-.8| + |3/7-.5| + |0-.9| + |1-.4| + |3/7-.9|, over 6
    by_hand_difference = (0.1 + 0.2 + (0.5 - 3 / 7) + 0.9 + 0.6 + (0.9 - 3 / 7)) / 6
    assert average_absolute_difference(people, human["metric"]) == pytest.approx(by_hand_difference)
    # brackets [0, 1/3), [1/3, 2/3), [2/3, 1]: same for e1-A, e2-A, e1-B only
    assert bracket_accuracy(people, human["metric"]) == pytest.approx(3 / 6)
    x, y = people, human["metric"].to_numpy()
    by_hand = ((x - x.mean()) * (y - y.mean())).sum() / (((x - x.mean()) ** 2).sum() * ((y - y.mean()) ** 2).sum()) ** 0.5
    assert pearson(people, human["metric"]) == pytest.approx(by_hand)
    table = places(by_people.rename("people"), by_metric.rename("metric"))
    assert list(table["by_people"]) == ["A", "C", "B"] and list(table["by_metric"]) == ["A", "B", "C"]
    assert list(table["agree"]) == [True, False, False]

    row = agreement_table(human, "score", {"score": 7, "metric": 1}).iloc[0]
    assert (row["metric"], row["reference"], row["examples"], row["configurations"]) == ("metric", "score", 6, 3)
    assert row["spearman"] == pytest.approx(0.5) and row["kendall"] == pytest.approx(1 / 3)
    assert row["average_absolute_difference"] == pytest.approx(by_hand_difference)
    assert row["bracket_accuracy"] == pytest.approx(0.5) and row["pearson"] == pytest.approx(by_hand)


def test_agreement_leaves_out_missing_scores_and_counts_them():
    scores = pd.DataFrame({"configuration": ["A", "A", "B", "B"], "human": [7, 0, 3, 7],
                           "judge": [7, None, 0, 7]})
    row = agreement_table(scores, "human", {"human": 7, "judge": 7}).iloc[0]
    assert row["examples"] == 3  # the unparsable judge reply is not a zero
    assert row["average_absolute_difference"] == pytest.approx((0 + 3 / 7 + 0) / 3)
    assert row["spearman"] == pytest.approx(1.0)  # A: 7 vs 7; B: 5 vs 3.5 -> same order


def test_one_configuration_has_no_rank_agreement_and_columns_absent_are_skipped():
    scores = pd.DataFrame({"configuration": ["A", "A"], "human": [7, 3], "judge": [7, 0]})
    table = agreement_table(scores, "human", {"human": 7, "judge": 7, "bertsim": 1})
    assert list(table["metric"]) == ["judge"]  # no bertsim column: no row
    assert np.isnan(table.iloc[0]["spearman"]) and table.iloc[0]["pearson"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least two configurations"):
        rank_agreement(pd.Series({"A": 1.0}), pd.Series({"A": 0.5}))


def test_brackets_by_hand():
    # edges 1/3 and 2/3: 0.2 | 0.5 | 0.9 ; 0.34 and 0.66 share the middle; 2/3 itself is in the top bracket
    assert bracket_accuracy([0.2, 0.34, 2 / 3, 0.9], [0.3, 0.66, 0.7, 0.5]) == pytest.approx(3 / 4)
    assert bracket_accuracy([0.2, 0.8], [0.4, 0.9], edges=(0.5,)) == pytest.approx(1.0)


def test_to_unit_divides_by_the_scales_maximum():
    assert to_unit([0, 3, 7], 7).tolist() == pytest.approx([0.0, 3 / 7, 1.0])
    with pytest.raises(ValueError, match="scale_max must be > 0, got 0"):
        to_unit([1], 0)
