"""Issue #38, "silently wrong", end to end: what a run that used to score quietly says now at the end of its
configuration -- an LLM reranker whose replies are all unreadable, and SQuAD-like evidence longer than a chunk."""
import json

import mlflow
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.fake_openai import FakeOpenAI

WORDS = "and then the keepers of the harbour wrote it down in the long book of the town".split()


def squad_file(folder) -> str:
    """Two articles of three paragraphs (about 40 words each): each question's evidence, its paragraph, is longer
    than a chunk of 12 words."""
    data = []
    for a in range(2):
        paragraphs = []
        for p in range(3):
            year = 1800 + 10 * a + p
            context = (f"Keeper {a}{p} lit the lamp in {year}. " + " ".join(WORDS) + f" in {year}. "
                       + " ".join(reversed(WORDS)) + ".")
            paragraphs.append({"context": context, "qas": [{
                "id": f"q{a}{p}", "question": f"When did keeper {a}{p} light the lamp?",
                "answers": [{"text": str(year), "answer_start": context.index(str(year))}]}]})
        data.append({"title": f"Harbour {a}", "paragraphs": paragraphs})
    path = folder / "squad.json"
    path.write_text(json.dumps({"data": data}))
    return str(path)


@pytest.mark.slow  # one run through the fake endpoint, ~60 s on a shared machine: the lines are unit-tested too
def test_garbage_reranker_replies_and_evidence_longer_than_a_chunk_are_said_and_counted(tmp_path):
    with FakeOpenAI() as server:  # no structured output: the fake replies in prose, no relevance can be read
        log = run_cli("flows.cli.evaluate", tmp_path, "dataset=squad", f"dataset.path={squad_file(tmp_path)}",
                      "chunking.size=12", "chunking.overlap=2", "setup=bm25", "retriever.k=2", "relations.gold=none",
                      "report.enabled=false", "llm=openai-compatible", f"llm.base_url={server.base_url}",
                      "llm.model=fake", "llm.api_key_env=null", "llm.structured_output=false", "rerank=llm",
                      "rerank.candidates=3", "rerank.parse_retries=0")
    assert ("all 18 reranker candidates got no score (18 replies could not be parsed, also when asked again): the "
            "reranking did nothing, the order is the retriever's") in log
    assert ("retrieval metrics cover 0 of 6 examples: 6 have evidence longer than a chunk (chunking.size=12 words); "
            "metrics.evidence_match=sentence counts a chunk that holds a whole sentence of it") in log
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("opi").experiment_id],
                                "tags.`opi.role` = 'configuration'")
    metrics = run.data.metrics
    assert metrics["rerank_unscored"] == metrics["rerank_pairs"] == metrics["rerank_parse_failures"] == 18
    assert "retrieval_examples" not in metrics and metrics["retrieval_evidence_too_long"] == 6
