"""opi.metrics.extrinsic: the blind annotation sheet people score 0, 3 or 7, read back strictly, and the LLM judge
on the same scale."""
import pandas as pd
import pytest

from opi.data import DataError
from opi.llm.client import ChatClient
from opi.metrics.extrinsic import (LLMJudge, annotation_sheet, export_sheet, import_sheet, parse_judgement,
                                   scores_by_configuration)
from tests.helpers.scores import GENERATED, HUMAN


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
    assert sorted(blank["id"]) == ["a1", "a2", "a3", "a4", "a5"]
    assert len(key) == 6 and set(key["id"]) == set(blank["id"])
    g1 = blank.loc[blank["generated_answer"] == "G1", "id"].item()
    assert sorted(key.loc[key["id"] == g1, "configuration"]) == ["A", "C"]


def test_the_shuffle_depends_on_the_seed_only():
    first, _ = annotation_sheet(answers(), seed=3)
    assert first.equals(annotation_sheet(answers(), seed=3)[0])
    orders = {tuple(annotation_sheet(answers(), seed=s)[0]["generated_answer"]) for s in range(5)}
    assert len(orders) > 1


def test_annotation_sheet_needs_its_columns():
    with pytest.raises(ValueError, match=r"annotation_sheet needs columns \['generated_answer'\]"):
        annotation_sheet(answers().drop(columns="generated_answer"))


def test_scores_read_back_reach_every_configuration_that_gave_the_answer(tmp_path):
    sheet, key = annotation_sheet(answers())
    path = export_sheet(sheet, tmp_path / "sheet.csv")
    fill(path, human_score)
    human = scores_by_configuration(import_sheet(path, key["id"]), key)
    assert list(human.columns) == ["example_id", "configuration", "score"]
    assert {(i, c): s for i, c, s in human.itertuples(index=False)} == HUMAN  # G1's 7 reaches A and C


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.assign(score=["7", "5", "3", "0", "7"]), r"row 3, field 'score': '5' is not one of 0, 3, 7"),
    (lambda s: s.assign(score=["7", "", "3", "0", "7"]), r"row 3, field 'score': '' is not one of 0, 3, 7"),
    (lambda s: s.assign(id=[s["id"][0], "a9", *s["id"][2:]]), r"row 3, field 'id': unknown id 'a9'"),
    (lambda s: s.iloc[:4], r"1 answer\(s\) not scored"),
    (lambda s: pd.concat([s, s.iloc[[0]]]), r"row 7: id 'a1' scored twice"),
    (lambda s: s.drop(columns="score"), r"missing column\(s\) \['score'\]"),
    (lambda s: s.assign(generated_answer=["G9", *s["generated_answer"][1:]]),
     r"row 2, field 'generated_answer': not the answer exported as 'a1'; this sheet belongs to another export"),
])
def test_import_rejects_bad_sheets(tmp_path, edit, message):
    sheet, key = annotation_sheet(answers())
    path = export_sheet(sheet, tmp_path / "sheet.csv")
    edit(fill(path, human_score).sort_values("id", ignore_index=True)).to_csv(path, index=False)
    with pytest.raises(DataError, match=message):
        import_sheet(path, key["id"], dict(zip(key["id"], key["generated_answer"])))


@pytest.mark.parametrize("reply, score", [
    ('{"score": 3}', 3), ('Sure: {"score": 7}', 7), ('{"score": 0}', 0),
    ('{"score": 5}', None), ("seven", None), ('{"score": false}', None), ('{"score": "7"}', None),
    ('{"score": 7.0}', None),
])
def test_parse_judgement_takes_only_an_integer_on_the_scale(reply, score):
    assert parse_judgement(reply) == score


def test_the_judge_asks_with_the_rubric_and_records_failures():
    class Replies:
        ask_json = ChatClient.ask_json  # the client's own ask-parse-retry logic over scripted replies

        def __init__(self, replies):
            self.replies, self.asked = list(replies), []

        def complete_many(self, requests, progress=None):
            self.asked += requests
            return [self.replies.pop(0) for _ in requests]

    llm = Replies(['{"score": 7}', "no idea", "still no", "nope"])
    judge = LLMJudge(llm, parse_retries=2)
    assert judge.score(["Q1?", "Q2?"], ["T1.", "T2."], ["A1.", "A2."]) == [7, None]
    assert judge.parse_failures == 1  # one example never parsed: None, counted, not 0
    messages, reply_format = llm.asked[0]
    assert "Question: Q1?\nGround truth: T1.\nGenerated: A1." in messages[0]["content"]
    assert reply_format["json_schema"]["schema"]["properties"]["score"] == {"type": "integer", "enum": [0, 3, 7]}
