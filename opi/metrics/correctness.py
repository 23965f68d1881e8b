"""Answer correctness, the RAGAS method: statements -> TP/FP/FN -> F1, blended with semantic similarity.

1. An LLM splits the answer and the ground truth into standalone statements (JSON, few-shot prompt).
2. An LLM puts each answer statement in exactly one of TP (supported by the ground truth) or FP, and each
   uncovered ground-truth statement in FN (JSON). A reply that breaks "exactly one class" counts as unparsable.
3. F1 = TP / (TP + 0.5·(FP + FN)), 0 when TP = 0 (so an empty answer scores 0).
4. score = (w_f1·F1 + w_sim·similarity) / (w_f1 + w_sim), weights 0.75/0.25 by default; with a threshold the
   similarity counts as 1 at or above it and 0 below.
An unparsable reply is asked again ``parse_retries`` times, then recorded as a failure: the example's score is
``None`` with a reason, it is counted, and averages leave it out. Never NaN.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Sequence

from opi.llm.prompts import load_prompt


def f1_from_counts(tp: int, fp: int, fn: int) -> float:
    return 0.0 if tp == 0 else tp / (tp + 0.5 * (fp + fn))


def blend(f1: float, similarity: float, weights: Sequence[float] = (0.75, 0.25),
          threshold: float | None = None) -> float:
    if len(weights) != 2 or min(weights) < 0 or sum(weights) == 0:
        raise ValueError(f"weights must be two non-negative numbers, not both 0, got {list(weights)}")
    if threshold is not None:
        similarity = 1.0 if similarity >= threshold else 0.0
    return (weights[0] * f1 + weights[1] * similarity) / sum(weights)


@dataclass(frozen=True)
class Correctness:
    score: float | None
    f1: float | None
    similarity: float
    tp: int = 0
    fp: int = 0
    fn: int = 0
    failure: str | None = None


def _json_object(reply: str) -> dict | None:
    for candidate in [reply.strip()] + re.findall(r"\{.*\}", reply, flags=re.S):
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_statements(reply: str) -> list[str] | None:
    value = _json_object(reply)
    statements = value.get("statements") if value else None
    if not isinstance(statements, list) or not all(isinstance(s, str) for s in statements):
        return None
    return [s.strip() for s in statements if s.strip()]


def parse_classes(reply: str, answer_statements: Sequence[str], truth_statements: Sequence[str]
                  ) -> tuple[int, int, int] | None:
    """(TP, FP, FN) when every answer statement sits in exactly one of TP/FP and FN holds only truth statements."""
    value = _json_object(reply)
    if not value or not all(isinstance(value.get(k), list) for k in ("TP", "FP", "FN")):
        return None
    tp, fp, fn = ([str(s).strip() for s in value[k]] for k in ("TP", "FP", "FN"))
    if sorted(tp + fp) != sorted(s.strip() for s in answer_statements):
        return None
    if not set(fn) <= {s.strip() for s in truth_statements} or len(fn) > len(truth_statements):
        return None
    return len(tp), len(fp), len(fn)


def _object_of_lists(*keys: str) -> dict:
    """JSON schema of an object whose keys each hold a list of strings (structured output where supported)."""
    from opi.llm.client import object_schema

    return object_schema(**{k: {"type": "array", "items": {"type": "string"}} for k in keys})


class AnswerCorrectness:
    def __init__(self, client, weights: Sequence[float] = (0.75, 0.25), threshold: float | None = None,
                 parse_retries: int = 2):
        self.client = client
        self.weights, self.threshold, self.parse_retries = tuple(weights), threshold, parse_retries
        self.statement_prompt = load_prompt("statements")
        self.class_prompt = load_prompt("correctness")
        self.parse_failures = 0

    def _ask(self, content: str, parse, schema: dict):
        from opi.llm.client import json_reply_format

        (parsed,), failures = self.client.ask_json(
            [[{"role": "user", "content": content}]], json_reply_format("reply", schema), parse, self.parse_retries,
            "That was not the JSON asked for. Reply with the JSON only.")
        self.parse_failures += failures
        return parsed

    def statements(self, question: str, text: str) -> list[str] | None:
        if not text.strip():
            return []
        return self._ask(self.statement_prompt.render(question=question, text=text), parse_statements,
                         _object_of_lists("statements"))

    def score(self, question: str, answer: str, truth: str, similarity: float) -> Correctness:
        answer_statements = self.statements(question, answer)
        truth_statements = self.statements(question, truth)
        if answer_statements is None or truth_statements is None:
            return Correctness(None, None, similarity, failure="unparsable statements")
        if not answer_statements or not truth_statements:
            tp, fp, fn = 0, len(answer_statements), len(truth_statements)
        else:
            prompt = self.class_prompt.render(question=question, answer_statements=json.dumps(answer_statements),
                                              truth_statements=json.dumps(truth_statements))
            counts = self._ask(prompt, lambda r: parse_classes(r, answer_statements, truth_statements),
                               _object_of_lists("TP", "FP", "FN"))
            if counts is None:
                return Correctness(None, None, similarity, failure="unparsable TP/FP/FN")
            tp, fp, fn = counts
        f1 = f1_from_counts(tp, fp, fn)
        return Correctness(blend(f1, similarity, self.weights, self.threshold), f1, similarity, tp, fp, fn)
