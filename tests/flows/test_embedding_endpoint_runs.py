"""An OpenAI-compatible embeddings endpoint as a user meets it in ``opi-eval``: kNN through it ranks as the local
model does when it serves the same vectors, a second run over the same embedding store sends nothing, and its
faults end as the chat side's do (one line, exit 2)."""
import mlflow
import pandas as pd
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.fake_openai import FakeOpenAI

COMMON = ["retriever=knn", "dataset.limit=3", "relations.gold=none", "report.enabled=false"]


def through(server: FakeOpenAI, *more: str) -> list[str]:
    return ["retriever.embedding.provider=openai-compatible", f"retriever.embedding.base_url={server.base_url}",
            "retriever.embedding.model=fake-embedder", "retriever.embedding.api_key_env=''", *more]


def runs_and_chunk_ids(tmp_path, count: int) -> tuple[list, list[list[list[int]]]]:
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("opi").experiment_id], "",
                              order_by=["attributes.start_time ASC"])
    assert len(runs) == count
    return runs, [pd.read_parquet(client.download_artifacts(run.info.run_id, "predictions.parquet", str(
        tmp_path / run.info.run_id)))["chunk_ids"].map(list).tolist() for run in runs]


@pytest.mark.slow
def test_knn_through_an_endpoint_serving_the_local_vectors_ranks_as_the_local_model(tmp_path, embedder):
    store = f"paths.embedding_store={tmp_path}/shared-embeddings.sqlite"
    with FakeOpenAI(vectors=lambda texts: embedder.raw(list(texts)).tolist()) as server:
        run_cli("flows.cli.evaluate", tmp_path, *COMMON)
        run_cli("flows.cli.evaluate", tmp_path, *COMMON, *through(server, store))
        sent = len(server.embedding_bodies)
        run_cli("flows.cli.evaluate", tmp_path, *COMMON, *through(server, store), cache="cold-stage-cache")
        assert sent > 0 and len(server.embedding_bodies) == sent  # the second run: every vector from the store
    runs, (local, remote, again) = runs_and_chunk_ids(tmp_path, 3)
    assert local == remote == again
    through_endpoint, from_store = runs[1].data.metrics, runs[2].data.metrics
    assert through_endpoint["embedding_http_requests"] == sent and through_endpoint["embedding_prompt_tokens"] > 0
    assert from_store["embedding_http_requests"] == 0 and from_store["texts_from_embedding_store"] > 0


@pytest.mark.slow  # each fault as the chat side ends it (a 500 too): tests/opi/test_embedding_endpoint.py
def test_a_rate_limited_embedding_endpoint_ends_the_run_in_one_line(tmp_path):
    with FakeOpenAI(mode="429", retry_after="0.1") as server:
        output = run_cli("flows.cli.evaluate", tmp_path, *COMMON, "tracking.enabled=false",
                         *through(server, "retriever.embedding.max_retries=1"), expect=2)
    problems = [line for line in output.splitlines() if "endpoint problem" in line]
    assert len(problems) == 1 and server.base_url in problems[0], output[-3000:]
    assert "Traceback" not in output, output[-3000:]
