"""A stage declared once (``flows.orchestration.stage``): its call's arguments bound by name, whether a call is
kept decided from them, and its key's code covering the declared modules, the components' and the embedding code
where a call embeds."""
from flows.orchestration import tasks
from flows.orchestration.stage import stage
from opi.llm.reader import ExtractiveReader, LLMReader
from opi.rerankers import CrossEncoderReranker, LLMReranker
from opi.retrievers import BM25Retriever, KNNRetriever
from opi.schemas import LLMConfig
from tests.flows.orchestration.test_code import edited


def test_a_calls_arguments_are_bound_by_name_with_the_defaults():
    arguments = tasks.classify.arguments(("clf", "llm", None, ["a"], ["t"], "context"))
    assert arguments["classifier"] == "clf" and arguments["registered"] is None


def test_whether_a_result_is_kept_is_decided_per_call_from_its_arguments():
    assert tasks.rerank.kept({"reranker": CrossEncoderReranker()}) is True
    assert tasks.rerank.kept({"reranker": LLMReranker()}) is False  # its replies are in the LLM call cache
    extractive = LLMConfig(name="extractive", reader=ExtractiveReader())
    assert tasks.answer.kept({"llm": extractive}) is True
    assert tasks.answer.kept({"llm": LLMConfig(name="x", reader=LLMReader(), model="m", base_url="http://h/v1")}) is False
    assert tasks.answer_quality.kept({}) is False and tasks.chunk_articles.kept({}) is True


def test_a_call_that_embeds_is_keyed_on_the_embedding_code_and_one_that_does_not_is_not(monkeypatch):
    bm25, knn = tasks.rank.code({"retriever": BM25Retriever()}), tasks.rank.code({"retriever": KNNRetriever()})
    assert tasks.rank.modules({"retriever": KNNRetriever()}) == ("opi.retrieval", "opi.embeddings")
    edited(monkeypatch, "base.py")  # opi/embeddings/base.py (and opi/retrievers/base.py: both retrievers')
    assert tasks.rank.code({"retriever": BM25Retriever()}) != bm25
    monkeypatch.undo()
    edited(monkeypatch, "local.py")  # the local embedding model: kNN's rankings only
    assert tasks.rank.code({"retriever": BM25Retriever()}) == bm25
    assert tasks.rank.code({"retriever": KNNRetriever()}) != knn


def test_a_declared_function_keeps_its_own_signature_and_its_task_adds_code_and_store():
    @stage("double", counted_as="double", uses=("opi.chunking",), embeds=True, kept=False)
    def double(values: list[int]) -> list[int]:
        return [2 * v for v in values]

    assert double.fn([1, 2]) == [2, 4] and double.modules({}) == ("opi.chunking", "opi.embeddings")
    assert list(double.task.fn.__signature__.parameters) == ["values", "code", "embedding_store"]
    assert double.task.fn([3], code="c").value == [6] and double.kept({}) is False
