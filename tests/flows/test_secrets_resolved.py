"""Secrets, round four, as a user meets them in ``opi-eval``: no key reaches a keyless endpoint from any component
(the run's embedding, the classifier's, the yardstick, the reader, the reranker), and a setting that resolves to a
key (``${oc.env:...}``, a resolver of your own) is refused in one line and written nowhere."""
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from flows.run.config import compose_config, typed
from tests.helpers.cli import run_cli
from tests.helpers.recording_openai import PLACEHOLDER, RecordingOpenAI

MARKER = "sk-proj-OpiResolvedMarker0123456789abcXYZ"
PLAIN_MARKER = "opi-plain-marker-4f2a9c"  # a key of no known shape, in a variable whose name says it holds one
QUICK = ["dataset.limit=2", "setup=bm25", "report.enabled=false"]


def leaks(folder: Path, output: str, marker: str) -> list[str]:
    """Every file under the test's folder (MLflow store and artifacts, Hydra's outputs, the stage cache, the call
    cache, Prefect's home and database, the console logs) holding the marker, and the console."""
    found = [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and marker.encode() in p.read_bytes()]
    return found + (["console"] if marker in output else [])


def last_line(output: str) -> str:
    return output.strip().splitlines()[-1]


@pytest.mark.parametrize("settings, expected", [
    (["tracking.label=${oc.env:MARKER_VAR}"],
     "invalid configuration: tracking.label (resolved from its interpolation) holds the key in the environment "
     "variable MARKER_VAR"),
    (["tracking.experiment=runs-${oc.env:OPENAI_API_KEY}"],
     "invalid configuration: tracking.experiment (resolved from its interpolation) holds the key in the "
     "environment variable OPENAI_API_KEY"),
    pytest.param(["hydra.run.dir=${oc.env:MARKER_VAR}"], "invalid configuration: hydra.run.dir (resolved from its "
                 "interpolation) holds the key in the environment variable MARKER_VAR", marks=pytest.mark.slow),
    pytest.param(["-m", "setup=knn,bm25", "tracking.label=${oc.env:MARKER_VAR}"], "invalid configuration: "
                 "tracking.label (resolved from its interpolation) holds the key", marks=pytest.mark.slow),
])
def test_a_setting_that_resolves_to_a_key_is_refused_in_one_line_and_written_nowhere(tmp_path, settings, expected):
    output = run_cli("flows.cli.evaluate", tmp_path, *settings, *QUICK,
                     env={"MARKER_VAR": MARKER, "OPENAI_API_KEY": PLAIN_MARKER}, expect=2)
    assert expected in last_line(output), output[-3000:]
    assert "Traceback" not in output
    assert leaks(tmp_path, output, MARKER) == [] and leaks(tmp_path, output, PLAIN_MARKER) == []
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "outputs").exists()


def test_a_resolver_of_your_own_that_gives_a_key_is_refused(monkeypatch):
    OmegaConf.register_new_resolver("opi_test_vault", lambda: MARKER, replace=True)
    with pytest.raises(ValueError, match=r"^tracking.label \(resolved from its interpolation\) holds what looks like "
                                         r"an API key") as refused:
        typed(compose_config(["tracking.label=${opi_test_vault:}"]))
    assert MARKER not in str(refused.value)


def test_variables_that_hold_no_key_resolve_as_usual(monkeypatch):
    monkeypatch.setenv("OPI_TEST_LABEL", "nightly-main")
    monkeypatch.setenv("OPENAI_API_KEY", PLAIN_MARKER)
    config = typed(compose_config(["tracking.label=${oc.env:OPI_TEST_LABEL}", "tracking.experiment=${oc.env:HOME}"]))
    assert config.tracking.label == "nightly-main"


@pytest.mark.slow  # a whole run through the endpoint: answers, reranking, classifier features, yardstick (~60 s)
def test_no_key_reaches_a_keyless_endpoint_from_any_component(tmp_path):
    """The issue's case (``embedding=openai-compatible embedding.api_key_env=null`` with OPENAI_API_KEY set: the
    classifier's features sent the key) and every other component that asks an endpoint, each its own model."""
    with RecordingOpenAI() as server:
        run_cli("flows.cli.evaluate", tmp_path, "embedding=openai-compatible", f"embedding.base_url={server.base_url}",
                "embedding.model=run-embedder", "embedding.api_key_env=null",
                "classifier.embedding.model=classifier-embedder", "classifier.embedding.api_key_env=''",
                "metrics.similarity.provider=openai-compatible", f"metrics.similarity.base_url={server.base_url}",
                "metrics.similarity.model=yardstick-embedder", "metrics.similarity.api_key_env=''",
                "llm=openai-compatible", f"llm.base_url={server.base_url}", "llm.model=reader-llm",
                "llm.api_key_env=null", "rerank=llm", "rerank.model=rerank-llm", "rerank.candidates=4",
                "setup=knn", "dataset.limit=6", "report.enabled=false", env={"OPENAI_API_KEY": MARKER})
    sent = server.authorizations()
    assert set(sent) == {"run-embedder", "classifier-embedder", "yardstick-embedder", "reader-llm", "rerank-llm"}
    assert all(headers == {PLACEHOLDER} for headers in sent.values()), sent
    assert leaks(tmp_path, "", MARKER) == []
