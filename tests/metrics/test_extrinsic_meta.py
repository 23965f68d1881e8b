import pandas as pd
import pytest

from opi.llm.client import ChatClient
from opi.data import DataError
from opi.metrics.extrinsic import (LLMJudge, annotation_sheet, configuration_means, export_sheet, import_sheet,
                                   parse_judgement, scores_by_configuration)
from opi.metrics.meta import (agreement_table, average_absolute_difference, bracket_accuracy, pearson, places,
                              rank_agreement, to_unit)

# three configurations x two examples; human 0-3-7 scores and a [0, 1] metric, chosen so that rankings differ
HUMAN = {("e1", "A"): 7, ("e2", "A"): 7, ("e1", "B"): 3, ("e2", "B"): 0, ("e1", "C"): 7, ("e2", "C"): 3}
METRIC = {("e1", "A"): 0.9, ("e2", "A"): 0.8, ("e1", "B"): 0.5, ("e2", "B"): 0.9, ("e1", "C"): 0.4, ("e2", "C"): 0.9}
# A and C gave the same answer to e1: people score it once
GENERATED = {("e1", "A"): "G1", ("e1", "C"): "G1", ("e1", "B"): "G2", ("e2", "A"): "G3", ("e2", "B"): "G4",
             ("e2", "C"): "G5"}


def answers() -> pd.DataFrame:
    keys = list(HUMAN)
    return pd.DataFrame({"example_id": [k[0] for k in keys], "configuration": [k[1] for k in keys],
                         "question": ["Q?"] * 6, "ground_truth": ["T."] * 6,
                         "generated_answer": [GENERATED[k] for k in keys]})


def fill(path, score_of) -> pd.DataFrame:
    sheet = pd.read_csv(path, dtype=str, keep_default_na=False)
    sheet["score"] = [str(score_of(answer)) for answer in sheet["generated_answer"]]
    sheet.to_csv(path, index=False)
    return sheet


def human_score(answer: str) -> int:  # the annotators: they see only the answer, never the configuration
    return next(HUMAN[k] for k, g in GENERATED.items() if g == answer)


def test_sheet_is_blind_and_scores_each_distinct_answer_once(tmp_path):
    sheet, key = annotation_sheet(answers(), seed=3)
    blank = pd.read_csv(export_sheet(sheet, tmp_path / "sheet.csv"), dtype=str, keep_default_na=False)
    assert list(blank.columns) == ["id", "question", "ground_truth", "generated_answer", "score"]
    assert set(blank["score"]) == {""} and len(blank) == 5 and blank["id"].is_unique
    assert sorted(blank["generated_answer"]) == ["G1", "G2", "G3", "G4", "G5"]
    assert len(key) == 6 and set(key["id"]) == set(blank["id"])
    g1 = blank.loc[blank["generated_answer"] == "G1", "id"].item()
    assert sorted(key.loc[key["id"] == g1, "configuration"]) == ["A", "C"]


def test_annotation_round_trip_and_meta_evaluation_by_hand(tmp_path):
    sheet, key = annotation_sheet(answers())
    path = export_sheet(sheet, tmp_path / "sheet.csv")
    fill(path, human_score)
    human = scores_by_configuration(import_sheet(path, key["id"]), key)
    assert {(i, c): s for i, c, s in human.itertuples(index=False)} == HUMAN
    human["metric"] = [METRIC[(i, c)] for i, c in zip(human["example_id"], human["configuration"])]

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
    assert list(table["agree"]) == [True, False, False]

    row = agreement_table(human, "score", {"score": 7, "metric": 1}).iloc[0]
    assert (row["metric"], row["examples"], row["configurations"]) == ("metric", 6, 3)
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


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.assign(score=["7", "5", "3", "0", "7"]), r"row 3, field 'score': '5' is not one of 0, 3, 7"),
    (lambda s: s.assign(id=[s["id"][0], "a9", *s["id"][2:]]), r"row 3, field 'id': unknown id 'a9'"),
    (lambda s: s.iloc[:4], r"1 answer\(s\) not scored"),
    (lambda s: pd.concat([s, s.iloc[[0]]]), r"row 7: id 'a1' scored twice"),
    (lambda s: s.drop(columns="score"), r"missing column 'score'"),
    (lambda s: s.assign(generated_answer=["G9", *s["generated_answer"][1:]]),
     r"row 2, field 'generated_answer': not the answer exported as 'a1'; this sheet belongs to another export"),
])
def test_import_rejects_bad_sheets(tmp_path, edit, message):
    sheet, key = annotation_sheet(answers())
    path = export_sheet(sheet, tmp_path / "sheet.csv")
    edit(fill(path, human_score).sort_values("id", ignore_index=True)).to_csv(path, index=False)
    with pytest.raises(DataError, match=message):
        import_sheet(path, key["id"], dict(zip(key["id"], key["generated_answer"])))


def test_judge_parses_the_scale_and_records_failures():
    assert parse_judgement('{"score": 3}') == 3 and parse_judgement('Sure: {"score": 7}') == 7
    assert parse_judgement('{"score": 5}') is None and parse_judgement("seven") is None
    assert parse_judgement('{"score": false}') is None  # not a 0

    class Replies:
        ask_json = ChatClient.ask_json  # the client's own ask-parse-retry logic over scripted replies

        def __init__(self, replies):
            self.replies = list(replies)

        def complete_many(self, requests, progress=None):
            return [self.replies.pop(0) for _ in requests]

    judge = LLMJudge(Replies(['{"score": 7}', "no idea", "still no", "nope"]), parse_retries=2)
    assert judge.score(["Q1?", "Q2?"], ["T1.", "T2."], ["A1.", "A2."]) == [7, None]
    assert judge.parse_failures == 1
