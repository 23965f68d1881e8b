import json

import pytest

from opi.llm.client import ChatClient
from opi.metrics.correctness import AnswerCorrectness, blend, f1_from_counts, parse_classes, parse_statements


class ScriptedLLM:
    """Answers the statement and TP/FP/FN calls from a script: the LLM replaced only at the function boundary
    (the chat client's own ask-parse-retry logic runs)."""

    ask_json = ChatClient.ask_json

    def complete_many(self, requests, progress=None):
        return [self.complete(*request) for request in requests]

    def __init__(self, statements: dict[str, list[str] | str], classes: list[str]):
        self.statements, self.classes, self.calls = statements, list(classes), []

    def complete(self, messages, response_format=None):
        assert response_format["type"] == "json_schema"
        content = messages[0]["content"]
        self.calls.append(content)
        if content.startswith("Break the text"):
            text = content.rsplit("Text: ", 1)[1].strip()
            reply = self.statements[text]
            return reply if isinstance(reply, str) else json.dumps({"statements": reply})
        return self.classes.pop(0)


def test_f1_and_blend_by_hand():
    assert f1_from_counts(1, 2, 1) == pytest.approx(1 / (1 + 0.5 * 3))  # 0.4
    assert f1_from_counts(0, 3, 2) == 0.0
    assert blend(0.4, 0.8) == pytest.approx(0.75 * 0.4 + 0.25 * 0.8)  # 0.5
    assert blend(0.4, 0.8, threshold=0.85) == pytest.approx(0.3)
    assert blend(0.4, 0.9, threshold=0.85) == pytest.approx(0.55)
    assert blend(0.4, 0.8, weights=(1, 1)) == pytest.approx(0.6)


def test_statements_and_classes_give_the_hand_computed_score():
    llm = ScriptedLLM({"The answer.": ["a1", "a2", "a3"], "The truth.": ["t1", "t2"]},
                      [json.dumps({"TP": ["a1"], "FP": ["a2", "a3"], "FN": ["t2"]})])
    result = AnswerCorrectness(llm).score("Q?", "The answer.", "The truth.", similarity=0.8)
    assert (result.tp, result.fp, result.fn) == (1, 2, 1)
    assert result.f1 == pytest.approx(0.4) and result.score == pytest.approx(0.5) and result.failure is None


def test_empty_answer_has_no_statements_and_scores_only_similarity():
    llm = ScriptedLLM({"The truth.": ["t1", "t2"]}, [])
    result = AnswerCorrectness(llm).score("Q?", "  ", "The truth.", similarity=0.4)
    assert (result.tp, result.fp, result.fn) == (0, 0, 2)
    assert result.f1 == 0.0 and result.score == pytest.approx(0.25 * 0.4)
    assert len(llm.calls) == 1  # no LLM call for an empty text, none for classes


def test_unparsable_replies_are_retried_then_recorded_never_nan():
    llm = ScriptedLLM({"The answer.": "sorry, I cannot", "The truth.": ["t1"]}, [])
    scorer = AnswerCorrectness(llm, parse_retries=2)
    result = scorer.score("Q?", "The answer.", "The truth.", similarity=0.7)
    assert result.score is None and result.failure == "unparsable statements"
    assert scorer.parse_failures == 1
    assert sum(c.startswith("Break the text") for c in llm.calls) == 3 + 1  # answer asked 3 times, truth once
    assert result.f1 is None and result.similarity == 0.7  # the similarity is kept, the score is missing


def test_empty_answer_and_truth_need_no_llm_and_score_the_similarity_share():
    llm = ScriptedLLM({}, [])
    empty = AnswerCorrectness(llm).score("Q?", "", "", similarity=1.0)
    assert (empty.tp, empty.fp, empty.fn, empty.f1) == (0, 0, 0, 0.0)
    assert empty.score == pytest.approx(0.25) and empty.failure is None  # 0.75 * 0 + 0.25 * 1
    assert llm.calls == []


def test_a_statement_in_two_classes_is_rejected_then_the_retry_counts():
    bad = json.dumps({"TP": ["a1"], "FP": ["a1"], "FN": []})
    good = json.dumps({"TP": ["a1"], "FP": [], "FN": []})
    llm = ScriptedLLM({"A.": ["a1"], "T.": ["t1"]}, [bad, good])
    result = AnswerCorrectness(llm).score("Q?", "A.", "T.", similarity=1.0)
    assert result.f1 == 1.0 and result.score == 1.0
    llm = ScriptedLLM({"A.": ["a1"], "T.": ["t1"]}, [bad, bad, bad])
    scorer = AnswerCorrectness(llm)
    assert scorer.score("Q?", "A.", "T.", similarity=1.0).failure == "unparsable TP/FP/FN"
    assert scorer.parse_failures == 1


def test_blend_refuses_weights_that_are_not_two_non_negative_numbers():
    for weights in [(1.0,), (0, 0), (-1, 2)]:
        with pytest.raises(ValueError, match="weights must be two non-negative numbers"):
            blend(0.5, 0.5, weights)


def test_parse_statements():
    assert parse_statements('{"statements": [" The mill opened. ", "", "It closed."]}') == ["The mill opened.",
                                                                                            "It closed."]
    assert parse_statements('Here: {"statements": []}') == []
    assert parse_statements('{"statements": "The mill opened."}') is None  # not a list
    assert parse_statements('{"statements": [1, 2]}') is None
    assert parse_statements("The mill opened.") is None


def test_parse_classes_needs_every_answer_statement_in_exactly_one_of_tp_and_fp():
    answer, truth = ["a1", "a2"], ["t1", "t2"]
    assert parse_classes('{"TP": ["a1"], "FP": ["a2"], "FN": ["t2"]}', answer, truth) == (1, 1, 1)
    assert parse_classes('{"TP": ["a1"], "FP": [], "FN": []}', answer, truth) is None  # a2 left out
    assert parse_classes('{"TP": ["a1", "a2"], "FP": ["a2"], "FN": []}', answer, truth) is None  # a2 twice
    assert parse_classes('{"TP": ["a1", "a2"], "FP": [], "FN": ["t9"]}', answer, truth) is None  # FN not a truth
    assert parse_classes('{"TP": ["a1", "a2"], "FP": []}', answer, truth) is None  # no FN list
