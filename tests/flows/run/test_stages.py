"""The stage sequence of a configuration: one ranking serves every k (the one cut is Ranking.top, applied per
configuration), so a sweep over k ranks once; the chunked articles are keyed by what they are made of."""
from types import SimpleNamespace

import pytest
import mlflow

from flows.orchestration import hashing
from flows.orchestration.hashing import hashed
from flows.run.stages import Results, chunked_articles
from opi.memory import MEMORY
from opi.schemas import ChunkingConfig
from tests.helpers.cli import run_cli


class Chunking:
    """The chunking stage's call, counted: each article's text as its one chunk."""

    hits = 0

    def __init__(self):
        self.calls = 0

    def call(self, stage, contexts, chunking, language):
        self.calls += 1
        return {f"a{i}": [text[: chunking.size]] for i, text in enumerate(contexts)}


def articles(texts: str, chunking: ChunkingConfig, language: str = "en") -> tuple[str, int]:
    """The chunked articles' key, and how many times the chunking stage was called for them."""
    config = SimpleNamespace(sentences=SimpleNamespace(language=language), chunking=chunking,
                             retrieval=SimpleNamespace(scope="article"))
    calls = Chunking()
    made = chunked_articles(config, SimpleNamespace(contexts=hashed(["one", "two"], texts)), Results(), calls)
    return made.content_hash, calls.calls


def test_chunked_articles_are_keyed_by_what_they_are_made_of_without_hashing_them(monkeypatch):
    # a race's round job chunks new articles each time: JSON of every chunk and sentence cost it ~0.7 s
    monkeypatch.setattr(hashing, "plain_hash", lambda value: pytest.fail("the chunked articles were hashed"))
    first, computed = articles("texts-of-stage-test-a", ChunkingConfig())
    assert computed == 1 and articles("texts-of-stage-test-a", ChunkingConfig()) == (first, 0)  # kept in memory
    others = {articles("texts-of-stage-test-b", ChunkingConfig())[0],
              articles("texts-of-stage-test-a", ChunkingConfig(size=50))[0],
              articles("texts-of-stage-test-a", ChunkingConfig(), "de")[0]}
    assert len(others | {first}) == 4  # other texts, chunking or language: another key


def test_a_sweep_alternating_two_chunkings_reads_each_once():
    # experiment=retriever_grid's innermost axis is chunking=small,paper: each job asked for the other chunking,
    # and with one kept every job read ~10 MB of chunked articles again (a race's round jobs too)
    with MEMORY.isolated("chunked articles"):
        called = [articles("texts-of-stage-test-c", ChunkingConfig(size=size))[1] for size in (50, 100, 50, 100, 50)]
    assert called == [1, 1, 0, 0, 0]


@pytest.mark.slow
def test_a_sweep_over_k_computes_the_ranking_once(tmp_path):
    run_cli("flows.cli.evaluate", tmp_path, "-m", "retriever.k=2,4,8", "setup=knn", "dataset.limit=4",
            "report.enabled=false")
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("opi").experiment_id],
                              "tags.`opi.role` = 'configuration'")
    assert sorted(run.data.params["retriever.k"] for run in runs) == ["2", "4", "8"]
    assert sum(run.data.metrics.get("computed_retrieval", 0) for run in runs) == 1  # kNN ranked once, for all three
    chunks = {run.data.params["retriever.k"]: run.data.metrics["retrieved_sentences_mean"] for run in runs}
    assert chunks["2"] < chunks["4"] < chunks["8"]  # each cut to its own k
