"""A stage task's work, measured inside it and sent back with its result (``flows.orchestration.work``): the store
it is given is the one its embedders use, a cache hit's work is none of this run's, and on Dask a text one worker
embedded is read from the store by another."""
import pytest

from flows.orchestration import tasks
from flows.orchestration.work import Measured, RunWork, measuring
from opi.embeddings import embedder_for, shared
from opi.memory import MEMORY
from opi.schemas import EmbeddingConfig
from tests.helpers.tiny_models import tiny_sentence_transformer
from tests.opi.test_embedding_work import SlowEmbedder


@pytest.fixture
def slow_embedders(monkeypatch):
    """``embedder_for`` gives SlowEmbedders (over the run's store), fresh for this test."""
    monkeypatch.setattr(shared, "_make", lambda config, store: SlowEmbedder(store))
    with MEMORY.isolated("embedders"):  # not the SlowEmbedders for the tests after this one
        yield


def embeds(texts: list[str]) -> int:
    embedder_for(EmbeddingConfig()).raw(texts)
    return len(texts)


def test_a_measured_body_returns_its_value_and_work_and_uses_the_store_it_is_given(tmp_path, slow_embedders):
    body = measuring(embeds)
    first = body(["alpha", "beta"], embedding_store=str(tmp_path / "e.sqlite"))
    MEMORY.forget("embedders")  # another process: nothing in memory
    second = body(["alpha", "beta", "gamma"], embedding_store=str(tmp_path / "e.sqlite"))
    assert isinstance(first, Measured) and first.value == 2 and second.value == 3
    assert first.work == {"texts_embedded": 2.0, "texts_from_embedding_store": 0.0}
    assert second.work == {"texts_embedded": 1.0, "texts_from_embedding_store": 2.0}
    assert second.totals == {"embedder_texts_embedded_total": 1.0, "embedder_unique_texts": 3.0,
                             "embedder_texts_requested_total": 3.0}


def test_a_stages_task_has_its_name_its_functions_source_and_parameters():
    task = tasks.rank.task
    assert tasks.rank.task is task and task.name == "rank" and task.source_code.startswith("@stage(\"rank\"")
    assert list(task.fn.__signature__.parameters)[-2:] == ["code", "embedding_store"]


def test_a_run_sums_the_work_of_the_calls_it_computed_and_the_totals_of_each_process():
    work = RunWork()
    totals = {"embedder_texts_embedded_total": 5.0, "embedder_unique_texts": 6.0,
              "embedder_texts_requested_total": 9.0}
    assert work.value_of(Measured("a", {"texts_embedded": 5.0}, "w1", totals), computed=True) == "a"
    later = {name: value + 1 for name, value in totals.items()}
    work.value_of(Measured("b", {"texts_embedded": 1.0}, "w1", later), computed=True)
    work.value_of(Measured("c", {"texts_embedded": 7.0}, "w2", totals), computed=True)
    assert work.value_of(Measured("d", {"texts_embedded": 50.0}, "w3", totals), computed=False) == "d"
    assert work.value_of(["a result cached before tasks were measured"], computed=False) == [
        "a result cached before tasks were measured"]
    metrics = work.metrics()  # and this process's totals
    assert metrics["texts_embedded"] == 13.0 and metrics["texts_from_embedding_store"] == 0.0
    assert metrics["embedder_texts_embedded_total"] >= 6.0 + 5.0 and set(work.processes) >= {"w1", "w2"}
    assert "w3" not in work.processes


@pytest.mark.slow
def test_a_text_one_dask_worker_embedded_is_read_by_another_from_the_store(tmp_path):
    distributed = pytest.importorskip("distributed")
    model = str(tiny_sentence_transformer(tmp_path / "tiny"))
    body, store = tasks.answer_similarity.task.fn, str(tmp_path / "embeddings.sqlite")
    args = (["the gold answer", "another gold answer"], ["a generated answer", "one more"],
            EmbeddingConfig(model=model))
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        first, second = sorted(client.scheduler_info()["workers"])
        one = client.submit(body, *args, embedding_store=store, workers=[first], pure=False).result()
        two = client.submit(body, *args, embedding_store=store, workers=[second], pure=False).result()
    assert one.process != two.process and one.value == pytest.approx(two.value)
    assert one.work == {"texts_embedded": 4.0, "texts_from_embedding_store": 0.0}
    assert two.work == {"texts_embedded": 0.0, "texts_from_embedding_store": 4.0}
