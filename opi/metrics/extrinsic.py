"""The paper's extrinsic check: answers scored 0, 3 or 7 by people (an annotation sheet) or by an LLM judge.

7 = the same meaning as the ground truth, nothing missing or extra; 3 = partial match, or extra information;
0 = no overlap. Scores are averaged per configuration and configurations ranked by the mean.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from opi.data import DataError
from opi.sheets import read_sheet, same_text
from opi.llm.prompts import load_prompt

SCALE = (0, 3, 7)
SHEET_COLUMNS = ["id", "question", "ground_truth", "generated_answer", "score"]
ANSWER_COLUMNS = ["example_id", "configuration", "question", "ground_truth", "generated_answer"]


def annotation_sheet(answers: pd.DataFrame, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sheet people score and the key that maps it back, from one row per (example, configuration).

    The sheet is blind and short: one row per distinct answer to an example (an answer that several configurations
    gave is scored once), shuffled, without the configuration. The key maps each sheet id to the (example,
    configuration) pairs it stands for."""
    missing = [c for c in ANSWER_COLUMNS if c not in answers]
    if missing:
        raise ValueError(f"annotation_sheet needs columns {missing}")
    distinct = answers.drop_duplicates(["example_id", "generated_answer"])[ANSWER_COLUMNS[:1] + ANSWER_COLUMNS[2:]]
    distinct = distinct.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    width = len(str(len(distinct)))
    distinct.insert(0, "id", [f"a{i + 1:0{width}d}" for i in range(len(distinct))])
    key = answers.merge(distinct[["id", "example_id", "generated_answer"]], on=["example_id", "generated_answer"])
    sheet = distinct.drop(columns="example_id").assign(score="")
    key = key[["id", "example_id", "configuration", "generated_answer"]].sort_values(["id", "configuration"])
    return sheet[SHEET_COLUMNS], key


def export_sheet(sheet: pd.DataFrame, path: str | Path) -> Path:
    """Write a sheet (from ``annotation_sheet``) as csv with the score column blank."""
    sheet.assign(score="")[SHEET_COLUMNS].to_csv(path, index=False)
    return Path(path)


def import_sheet(path: str | Path, known_ids: Iterable[str], answers: Mapping[str, str] | None = None
                 ) -> pd.DataFrame:
    """Read a filled sheet back: every known id scored exactly once with 0, 3 or 7; anything else names its row.
    With ``answers`` (id -> the exported answer), each row's answer must be the one exported under its id, so a
    sheet from another export cannot be scored against this key."""
    # with a key, the answer column too: it is what ties each row to this export
    sheet = read_sheet(path, ["id", "score", *(["generated_answer"] if answers is not None else [])],
                       "opi-annotate export")
    known = set(known_ids)
    if answers is not None:
        for row_number, (sheet_id, answer) in enumerate(zip(sheet["id"], sheet["generated_answer"]), start=2):
            if sheet_id in answers and not same_text(answers[sheet_id], answer):
                raise DataError(f"{path}, row {row_number}, field 'generated_answer': not the answer exported as "
                                f"{sheet_id!r}; this sheet belongs to another export (export again and re-score)")
    seen: set[str] = set()
    scores = []
    for row_number, row in enumerate(sheet.itertuples(index=False), start=2):  # row 1 is the header
        if row.id not in known:
            raise DataError(f"{path}, row {row_number}, field 'id': unknown id {row.id!r}")
        if row.id in seen:
            raise DataError(f"{path}, row {row_number}: id {row.id!r} scored twice")
        seen.add(row.id)
        if row.score.strip() not in {str(s) for s in SCALE}:
            raise DataError(f"{path}, row {row_number}, field 'score': {row.score!r} is not one of 0, 3, 7")
        scores.append(int(row.score))
    unscored = known - seen
    if unscored:
        raise DataError(f"{path}: {len(unscored)} answer(s) not scored, e.g. {sorted(unscored)[:2]}")
    return pd.DataFrame({"id": list(sheet["id"]), "score": scores})


def scores_by_configuration(scores: pd.DataFrame, key: pd.DataFrame) -> pd.DataFrame:
    """Sheet scores spread back to every (example, configuration) that gave the scored answer."""
    return key.merge(scores, on="id", validate="many_to_one")[["example_id", "configuration", "score"]]


def parse_judgement(reply: str) -> int | None:
    import re

    for candidate in [reply.strip()] + re.findall(r"\{[^{}]*\}", reply):
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, dict) and type(value.get("score")) is int and value["score"] in SCALE:
            return int(value["score"])
    return None


def parse_reason(reply: str | None) -> str | None:
    """The judge's one-sentence reason, where its reply gives one."""
    import re

    for candidate in [(reply or "").strip()] + re.findall(r"\{[^{}]*\}", reply or ""):
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, dict) and isinstance(value.get("reason"), str) and value["reason"].strip():
            return value["reason"].strip()
    return None


class LLMJudge:
    """The 0-3-7 rubric as an LLM prompt (JSON schema with the enum 0/3/7 where supported); failures are None.
    ``reasons``: the judge's one-sentence reason per answer of the last ``score`` (None where it gave none)."""

    def __init__(self, client, parse_retries: int = 2):
        self.client = client
        self.parse_retries = parse_retries
        self.prompt = load_prompt("judge")
        self.parse_failures = 0

    def score(self, questions: Sequence[str], truths: Sequence[str], answers: Sequence[str]) -> list[int | None]:
        from opi.llm.client import json_reply_format, object_schema

        reply_format = json_reply_format("score", object_schema(score={"type": "integer", "enum": list(SCALE)},
                                                                reason={"type": "string"}))
        conversations = [[{"role": "user", "content": self.prompt.render(question=q, truth=t, answer=a)}]
                         for q, t, a in zip(questions, truths, answers)]
        result, failures = self.client.ask_json(conversations, reply_format, parse_judgement, self.parse_retries,
                                                'Reply with {"score": 0, 3 or 7, "reason": "..."} only.')
        self.parse_failures += failures
        record_of = getattr(self.client, "record_of", lambda *_: None)
        self.reasons = [parse_reason(getattr(record_of(c, reply_format), "content", None)) for c in conversations]
        return result
