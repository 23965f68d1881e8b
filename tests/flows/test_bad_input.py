"""The bad-input catalogue of docs/reliability.md, one row per case, through `opi-eval` as a user runs it: each ends
with a non-zero exit code and one clear message naming the culprit and what to do, before any work is paid for,
and no traceback."""
import json

import pandas as pd
import pytest

from opi.data import load_examples
from opi.schemas import DatasetConfig
from tests.helpers.cli import run_cli
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.cli import free_port
from tests.helpers.marks import slow_except

GOOD = load_examples(DatasetConfig(kind="bundled", limit=3))[0]


def rows(**changes_of_row_2):
    records = [{"id": e.id, "context": e.context, "question": e.question, "answer": e.answer,
                "relation": e.relation} for e in GOOD]
    records[1].update(changes_of_row_2)
    return records


def jsonl(records):
    return "\n".join(json.dumps(r) for r in records) + "\n"


# name -> (file contents (str or bytes) or None, extra overrides, expected text in the one-line error)
DATA_CASES = {
    "missing column": (jsonl([{k: v for k, v in r.items() if k != "answer"} for r in rows()]), [],
                       "row 1: missing field(s) ['answer']"),
    "empty context": (jsonl(rows(context="  ")), [], "row 2, field 'context': empty"),
    "empty answer": (jsonl(rows(answer="")), [], "row 2, field 'answer': empty"),
    "unknown relation label": (jsonl(rows(relation="telepathic")), [], "row 2, field 'relation': unknown label"),
    "duplicate ids": (jsonl(rows(id=GOOD[0].id)), [], "row 2, field 'id': duplicate id"),
    "undecodable bytes": (jsonl(rows()).encode() + b'{"context": "caf\xe9"}\n', [], "not valid UTF-8 at byte"),
    "1,000,000-word context": (jsonl(rows(context="word " * 1_000_000)), [],
                               "row 2, field 'context': 1,000,000 words, more than dataset.max_context_words"),
    "question longer than context": (jsonl(rows(question="why " * 50, context="Short text here.")), [],
                                     "longer than its context (3); are the columns swapped?"),
    "zero rows": ("", [], "the dataset has zero rows"),
}
CONFIG_CASES = {
    "unknown retriever": (["retriever=bm26"], "Could not find 'retriever/bm26'"),
    "negative k": (["retriever.k=-1"], "k must be >= 1, got -1"),
    "overlap >= chunk size": (["chunking.overlap=100"], "chunking.overlap must be >= 0 and smaller than chunking.size"),
    "beta <= 0": (["metrics.beta=0"], "metrics.beta must be a finite number > 0"),
}


def no_traceback(output):
    assert "Traceback" not in output, output[-3000:]


@pytest.mark.parametrize("case", slow_except(DATA_CASES, {"missing column", "unknown relation label"}))
def test_bad_data_is_named_before_any_work(tmp_path, case):
    contents, overrides, expected = DATA_CASES[case]
    path = tmp_path / "data.jsonl"
    path.write_bytes(contents if isinstance(contents, bytes) else contents.encode())
    output = run_cli("flows.cli.evaluate", tmp_path, "dataset=table", f"dataset.path={path}", *overrides, expect=2)
    assert expected in output and "data.jsonl" in output, output[-2000:]
    assert not (tmp_path / "cache").exists()  # stopped before the first stage: no stage result, no lock
    no_traceback(output)


def test_label_file_that_does_not_match(tmp_path):
    pd.DataFrame([{"context": e.context, "question": e.question, "answer": e.answer} for e in GOOD]).to_parquet(
        tmp_path / "test.parquet")
    pd.DataFrame({"row": [1, 2, 9], "relation": [e.relation for e in GOOD]}).to_csv(tmp_path / "labels.csv",
                                                                                    index=False)
    output = run_cli("flows.cli.evaluate", tmp_path, "dataset=rag12000", f"dataset.path={tmp_path}/test.parquet",
                     f"dataset.labels_path={tmp_path}/labels.csv", "dataset.label_join=row", expect=2)
    assert "labels.csv: 1 label(s) name no example" in output
    no_traceback(output)


@pytest.mark.parametrize("case", slow_except(CONFIG_CASES, {"unknown retriever", "negative k"}))
def test_bad_config_fails_at_compose_time(tmp_path, case):
    overrides, expected = CONFIG_CASES[case]
    output = run_cli("flows.cli.evaluate", tmp_path, *overrides, expect=None)
    assert expected in output
    assert "bundled dataset" not in output  # nothing was loaded
    no_traceback(output)


@pytest.mark.parametrize("case, expected", [
    pytest.param("unreachable endpoint", "cannot reach", marks=pytest.mark.slow),
    pytest.param("wrong API key", "refused the API key (401): check OPENAI_API_KEY", marks=pytest.mark.slow),
    pytest.param("unknown model", "does not know model 'gpt-9' (404): check llm.model", marks=pytest.mark.slow),
])
def test_llm_endpoint_problems_stop_the_run_with_what_to_fix(tmp_path, case, expected):
    with FakeOpenAI(known_models={"fake"}, api_key="right-key") as server:
        base_url = f"http://127.0.0.1:{free_port()}/v1" if case == "unreachable endpoint" else server.base_url
        key = "wrong-key" if case == "wrong API key" else "right-key"
        model = "gpt-9" if case == "unknown model" else "fake"
        output = run_cli("flows.cli.evaluate", tmp_path, "llm=openai-compatible", f"llm.base_url={base_url}",
                         f"llm.model={model}", "llm.max_retries=0", "dataset.limit=2",
                         env={"OPENAI_API_KEY": key}, expect=2)
    assert expected in output, output[-2000:]
    no_traceback(output)
