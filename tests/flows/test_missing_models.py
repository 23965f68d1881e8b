"""Models that are not there, through ``opi-eval`` as a user runs it (offline: the tests set HF_HUB_OFFLINE): every
component that loads a model says so in one line naming the setting and what to do, exit 2, before the data loads
or MLflow opens (no stage cache, no MLflow store); in a sweep, before the parent run."""
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.marks import slow_except

HUB = "no such folder, and no hub model of that name in the Hugging Face cache"
CASES = {
    "cross-encoder folder": (["rerank=cross-encoder", "rerank.model=/nonexistent"],
                             "model problem: rerank.model=/nonexistent: no such folder: give the folder holding the "
                             "model's files"),
    "the README's cross-encoder offline": (["rerank=cross-encoder"],
                                           f"model problem: rerank.model=cross-encoder/ms-marco-MiniLM-L6-v2: {HUB}"),
    "a retriever's own model folder": (["setup=knn", "retriever.embedding.model=/models/x"],
                                       "model problem: retriever.embedding.model=/models/x: no such folder"),
    "a hub embedding offline": (["embedding.model=BAAI/bge-small-en-v1.5"],
                                f"model problem: embedding.model=BAAI/bge-small-en-v1.5: {HUB}"),
    "a packaged name that does not exist": (["embedding.model=packaged:all-MiniLM-L7-v2"],
                                            "model problem: embedding.model=packaged:all-MiniLM-L7-v2: no packaged "
                                            "model of that name (packaged: packaged:all-MiniLM-L6-v2)"),
    "the yardstick's folder": (["metrics.similarity.model=/models/y"],
                               "model problem: metrics.similarity.model=/models/y: no such folder"),
    "a member's model in a combination": (["setup=a_four", "retrievers.knn.embedding.model=/models/x"],
                                          "model problem: retrievers.knn.embedding.model=/models/x: no such folder"),
    "the classifier's model": (["classifier.embedding.model=/models/c"],
                               "model problem: classifier.embedding.model=/models/c: no such folder"),
    "a local LLM's file": (["llm=local", "llm.local_server.model=/models/z.gguf"],
                           "model problem: llm.local_server.model=/models/z.gguf: no such file: give the path of a "
                           ".gguf model"),
    "a sweep": (["-m", "setup=knn,bm25", "embedding.model=/models/x"],
                "model problem: embedding.model=/models/x: no such folder"),
}


@pytest.mark.parametrize("case", slow_except(CASES, {"cross-encoder folder", "a packaged name that does not exist"}))
def test_a_model_that_is_not_there_is_one_line_before_the_data_loads(tmp_path, case):
    overrides, expected = CASES[case]
    output = run_cli("flows.cli.evaluate", tmp_path, *overrides, "report.enabled=false", expect=2)
    assert expected in output.strip().splitlines()[-1], output[-3000:]
    assert "Traceback" not in output and output.count("model problem") == 1, output[-3000:]
    assert not (tmp_path / "cache").exists() and not (tmp_path / "mlflow.db").exists()
