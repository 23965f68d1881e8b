"""A registered relation classifier (``classifier.registered``) resolved to its version and the place its files
are: ``models:/name@alias`` through the alias, ``models:/name/<version>`` as given; nothing for a classifier that
is not registered."""
from types import SimpleNamespace

import pytest
from mlflow import MlflowClient

from flows.base.errors import CommandError
from flows.orchestration.tasks import RegisteredModel
from flows.tracking.registry import resolve_registered
from opi.classify import LLMRelationClassifier
from tests.helpers.mlflow_stores import empty_store


def config(uri: str, registered=...):
    """What ``resolve_registered`` reads of an OPIConfig: the classifier's ``registered`` and the tracking URI."""
    classifier = LLMRelationClassifier() if registered is ... else SimpleNamespace(registered=registered)
    return SimpleNamespace(classifier=classifier, tracking=SimpleNamespace(tracking_uri=uri))


@pytest.fixture
def registry(tmp_path):
    """A store with model ``clf`` at versions 1 and 2 (files in folders v1, v2), alias ``candidate`` on version 1."""
    uri = empty_store(tmp_path)
    client = MlflowClient(uri)
    client.create_registered_model("clf")
    for version in (1, 2):
        (tmp_path / f"v{version}").mkdir()
        client.create_model_version("clf", str(tmp_path / f"v{version}"))
    client.set_registered_model_alias("clf", "candidate", "1")
    return uri, client, tmp_path


def test_a_classifier_that_is_not_registered_resolves_to_nothing(tmp_path):
    uri = f"sqlite:///{tmp_path}/none.db"
    assert resolve_registered(config(uri)) is None  # an LLM classifier: the protocol's default, none
    assert resolve_registered(config(uri, None)) is None
    assert resolve_registered(config(uri, "")) is None
    assert not (tmp_path / "none.db").exists()  # no store opened for it


def test_an_alias_resolves_to_the_version_it_points_at(registry):
    uri, _, folder = registry
    assert resolve_registered(config(uri, "models:/clf@candidate")) == RegisteredModel("models:/clf/1",
                                                                                     str(folder / "v1"))


def test_a_new_version_under_the_alias_is_a_different_model(registry):
    """The point of resolving: the cache keys on ``models:/clf/2``, not on the alias that moved."""
    uri, client, folder = registry
    before = resolve_registered(config(uri, "models:/clf@candidate"))
    client.set_registered_model_alias("clf", "candidate", "2")
    after = resolve_registered(config(uri, "models:/clf@candidate"))
    assert after == RegisteredModel("models:/clf/2", str(folder / "v2")) and after != before


def test_a_version_number_is_taken_as_given(registry):
    uri, _, folder = registry
    assert resolve_registered(config(uri, "models:/clf/2")) == RegisteredModel("models:/clf/2", str(folder / "v2"))
    assert resolve_registered(config(uri, "models:/clf/1")).location == str(folder / "v1")


def test_a_name_alias_or_version_the_store_does_not_know_is_one_line_naming_what_it_has(registry, tmp_path):
    uri, _, _ = registry
    has = "This store registers clf (@candidate): name one as models:/<name>@<alias> or models:/<name>/<version>"
    for wrong, said in [("models:/clf@nope", "Registered model alias nope not found."),
                        ("models:/other@candidate", "Registered Model with name=other not found."),
                        ("models:/clf/9", "")]:
        with pytest.raises(CommandError) as raised:
            resolve_registered(config(uri, wrong))
        assert str(raised.value).startswith(f"classifier.registered={wrong}: {said}") and str(raised.value).endswith(has)
    with pytest.raises(CommandError, match="This store registers no model: train one with opi-train-classifier"):
        resolve_registered(config(empty_store(tmp_path / "other"), "models:/clf@candidate"))
