import pandas as pd
import pytest

from opi.data import DataError
from opi.metrics.extrinsic import LLMJudge, configuration_means, export_sheet, import_sheet, parse_judgement
from opi.metrics.meta import average_absolute_difference, bracket_accuracy, pearson, places, rank_agreement, to_unit

# three configurations x two examples; human 0-3-7 scores and a [0, 1] metric, chosen so that rankings differ
HUMAN = {("e1", "A"): 7, ("e2", "A"): 7, ("e1", "B"): 3, ("e2", "B"): 0, ("e1", "C"): 7, ("e2", "C"): 3}
METRIC = {("e1", "A"): 0.9, ("e2", "A"): 0.8, ("e1", "B"): 0.5, ("e2", "B"): 0.9, ("e1", "C"): 0.4, ("e2", "C"): 0.9}


def answers() -> pd.DataFrame:
    keys = list(HUMAN)
    return pd.DataFrame({"id": [k[0] for k in keys], "configuration": [k[1] for k in keys],
                         "question": ["Q?"] * 6, "ground_truth": ["T."] * 6, "generated_answer": ["G."] * 6})


def test_annotation_round_trip_and_meta_evaluation_by_hand(tmp_path):
    sheet = export_sheet(answers(), tmp_path / "sheet.csv")
    blank = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    assert list(blank.columns) == ["id", "configuration", "question", "ground_truth", "generated_answer", "score"]
    assert set(blank["score"]) == {""}
    blank["score"] = [str(HUMAN[(i, c)]) for i, c in zip(blank["id"], blank["configuration"])]  # the annotators
    blank.to_csv(sheet, index=False)
    human = import_sheet(sheet, answers())
    human["metric"] = [METRIC[(i, c)] for i, c in zip(human["id"], human["configuration"])]

    by_people = configuration_means(human, "score")    # A 7, C 5, B 1.5
    by_metric = configuration_means(human, "metric")   # A .85, B .70, C .65
    assert list(by_people.index) == ["A", "C", "B"] and list(by_metric.index) == ["A", "B", "C"]
    agreement = rank_agreement(by_people, by_metric)
    assert agreement["spearman"] == pytest.approx(1 - 6 * (0 + 1 + 1) / (3 * (9 - 1)))  # 0.5
    assert agreement["kendall"] == pytest.approx((2 - 1) / 3)  # A-B, A-C concordant; B-C discordant

    people = to_unit(human["score"], 7)
    # |1-.9| + |1-.8| + |3/7-.5| + |0-.9| + |1-.4| + |3/7-.9|, over 6
    assert average_absolute_difference(people, human["metric"]) == pytest.approx(
        (0.1 + 0.2 + (0.5 - 3 / 7) + 0.9 + 0.6 + (0.9 - 3 / 7)) / 6)
    # brackets [0, 1/3), [1/3, 2/3), [2/3, 1]: same for e1-A, e2-A, e1-B only
    assert bracket_accuracy(people, human["metric"]) == pytest.approx(3 / 6)
    x, y = people, human["metric"].to_numpy()
    by_hand = ((x - x.mean()) * (y - y.mean())).sum() / (((x - x.mean()) ** 2).sum() * ((y - y.mean()) ** 2).sum()) ** 0.5
    assert pearson(people, human["metric"]) == pytest.approx(by_hand)
    table = places(by_people.rename("people"), by_metric.rename("metric"))
    assert list(table["agree"]) == [True, False, False]


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.assign(score=["7", "5", "3", "0", "7", "3"]), r"row 3, field 'score': '5' is not one of 0, 3, 7"),
    (lambda s: s.assign(id=["e1", "e9", "e1", "e2", "e1", "e2"]), r"row 3: unknown id 'e9'"),
    (lambda s: s.iloc[:5], r"1 answer\(s\) not scored"),
    (lambda s: pd.concat([s, s.iloc[[0]]]), r"row 8: id 'e1' scored twice"),
])
def test_import_rejects_bad_sheets(tmp_path, edit, message):
    sheet = export_sheet(answers(), tmp_path / "sheet.csv")
    filled = pd.read_csv(sheet, dtype=str, keep_default_na=False).assign(score=["7", "7", "3", "0", "7", "3"])
    edit(filled).to_csv(sheet, index=False)
    with pytest.raises(DataError, match=message):
        import_sheet(sheet, answers())


def test_judge_parses_the_scale_and_records_failures():
    assert parse_judgement('{"score": 3}') == 3 and parse_judgement('Sure: {"score": 7}') == 7
    assert parse_judgement('{"score": 5}') is None and parse_judgement("seven") is None

    class Replies:
        def __init__(self, replies):
            self.replies = list(replies)

        def complete_many(self, requests, progress=None):
            return [self.replies.pop(0) for _ in requests]

    judge = LLMJudge(Replies(['{"score": 7}', "no idea", "still no", "nope"]), parse_retries=2)
    assert judge.score(["Q1?", "Q2?"], ["T1.", "T2."], ["A1.", "A2."]) == [7, None]
    assert judge.parse_failures == 1
