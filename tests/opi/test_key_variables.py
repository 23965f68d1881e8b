"""A key variable (``api_key_env``) that is null or '' means no key, wherever it is carried: the schemas, a
component's own embedding resolved over the run's, the classifier's features (fitted, pickled, reloaded). The run's
key never goes to a server it was not meant for."""
import pytest

from opi.classify import LocalRelationClassifier, endpoint_settings
from opi.embeddings import resolved
from opi.relation_features import SentenceEmbeddingFeatures
from opi.relations import Triple
from opi.schemas import EmbeddingConfig, LLMConfig
from tests.helpers.recording_openai import PLACEHOLDER, RecordingOpenAI

MARKER = "sk-proj-OpiKeyMarker0123456789abcdefXYZ"
KEYED = EmbeddingConfig(provider="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")


@pytest.mark.parametrize("given", [None, "", "  "])
def test_an_empty_or_null_key_variable_is_no_variable_in_every_endpoint_group(given):
    assert EmbeddingConfig(api_key_env=given).api_key_env is None
    assert LLMConfig(name="x", reader=None, model="m", api_key_env=given).api_key_env is None


@pytest.mark.parametrize("override, expected", [
    ({}, "OPENAI_API_KEY"),  # the run's endpoint, the run's variable
    ({"model": "other"}, "OPENAI_API_KEY"),
    ({"api_key_env": ""}, None),  # '': none, on the run's endpoint too
    ({"api_key_env": "MINE"}, "MINE"),
    ({"base_url": "http://127.0.0.1:9/v1"}, "OPENAI_API_KEY"),  # the same server
    ({"base_url": "http://elsewhere:8000/v1"}, None),  # another server: only the variable named for it
    ({"base_url": "http://elsewhere:8000/v1", "api_key_env": None}, None),
    ({"base_url": "http://elsewhere:8000/v1", "api_key_env": "THEIRS"}, "THEIRS"),
])
def test_a_components_embedding_takes_the_runs_key_variable_only_on_the_runs_server(override, expected):
    assert resolved(KEYED, override).api_key_env == expected


def test_a_resolved_embedding_is_used_as_it_is():
    keyless = EmbeddingConfig(provider="openai-compatible", base_url="http://127.0.0.1:9/v1", api_key_env=None)
    assert resolved(EmbeddingConfig(), keyless) is keyless
    assert endpoint_settings(keyless)["api_key_env"] is None


TRIPLES = [Triple(f"text {i}", f"question {i}", f"answer {i}") for i in range(6)]
LABELS = ["direct_matching", "multi_hop"] * 3


def test_the_local_classifiers_features_send_no_key_to_a_keyless_endpoint(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", MARKER)
    with RecordingOpenAI() as server:
        embedding = EmbeddingConfig(provider="openai-compatible", base_url=server.base_url, model="clf-features",
                                    api_key_env=None)
        classifier = LocalRelationClassifier(embedding=embedding).fit(TRIPLES, LABELS)
        assert classifier.predict(TRIPLES[:2]) and server.requests
    assert server.authorizations() == {"clf-features": {PLACEHOLDER}}


def test_features_pickled_without_their_null_key_variable_send_no_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", MARKER)
    with RecordingOpenAI() as server:
        settings = {"provider": "openai-compatible", "base_url": server.base_url, "model": "old-pickle"}
        vectors = SentenceEmbeddingFeatures("old-pickle", "cpu", settings).transform(["one", "two"])
    assert vectors.shape == (2, 8)
    assert server.authorizations() == {"old-pickle": {PLACEHOLDER}}
