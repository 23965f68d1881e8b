"""The process's shared embedders (``opi.embeddings.shared``): how a component's embedding override combines with the
run's (``resolved``: unset fields keep the run's, a dataclass override is read as its fields, no override is the
run itself, and the key-variable rule across servers), which settings make an embedder another one (``identity``:
all but the batch size), and ``embedder_for`` giving one embedder per model and store (the run's store from
``use_store``), with ``embedding_counts`` summed over them. A fake ``_make`` and ``store_at`` stand in for the real
model and SQLite store, and the process memory of embedders is emptied before and after each test. The key-variable
cases in full are in tests/opi/test_key_variables.py; the real shared model in tests/opi/test_embeddings.py."""
import dataclasses

import numpy as np
import pytest

from opi.embeddings import Embedder, embedder_for, embedding_counts, resolved, shared, use_store
from opi.embeddings.shared import identity
from opi.memory import MEMORY
from opi.schemas import EmbeddingConfig, EmbeddingOverride

RUN = EmbeddingConfig(provider="openai-compatible", base_url="http://run:8000/v1", model="run-model", batch_size=16)


def test_an_override_changes_only_the_fields_it_sets_and_no_override_is_the_run_itself():
    assert resolved(RUN) is RUN and resolved(RUN, "not settings") is RUN
    assert resolved(RUN, {"model": None, "unknown": 3}) is RUN  # nothing set that an embedding has
    as_dict = resolved(RUN, {"model": "mine", "batch_size": 4, "device": None})
    assert (as_dict.model, as_dict.batch_size, as_dict.device, as_dict.base_url, as_dict.api_key_env) == \
        ("mine", 4, "cpu", "http://run:8000/v1", "OPENAI_API_KEY")
    assert RUN.model == "run-model"  # the run's settings are not changed in place
    as_dataclass = resolved(RUN, EmbeddingOverride(model="mine", batch_size=4))
    assert as_dataclass == as_dict


def test_a_component_on_another_server_gets_only_the_key_variable_it_names():
    elsewhere = resolved(RUN, EmbeddingOverride(base_url="http://other:9000/v1", model="theirs"))
    assert (elsewhere.base_url, elsewhere.model, elsewhere.api_key_env) == ("http://other:9000/v1", "theirs", None)
    named = resolved(RUN, EmbeddingOverride(base_url="http://other:9000/v1", api_key_env="OTHER_KEY"))
    assert named.api_key_env == "OTHER_KEY"
    assert resolved(RUN, {"base_url": "http://run:8000/v1", "model": "x"}).api_key_env == "OPENAI_API_KEY"


def test_identity_is_every_setting_but_the_batch_size():
    assert identity(RUN) == identity(dataclasses.replace(RUN, batch_size=512))
    assert identity(RUN) != identity(dataclasses.replace(RUN, model="other"))
    assert identity(RUN) != identity(dataclasses.replace(RUN, dimensions=256))
    names = [name for name, _ in identity(RUN)]
    assert "batch_size" not in names and ("model", "run-model") in identity(RUN)
    assert len(names) == len(dataclasses.fields(EmbeddingConfig)) - 1


class FakeEmbedder(Embedder):
    """What the fake ``_make`` builds: vectors from the text's length; it keeps the store it was given."""

    def __init__(self, config, store):
        super().__init__(batch_size=config.batch_size)
        self.config, self.given_store = config, store

    @property
    def key(self):
        return f"fake-{self.config.model}"

    @property
    def name(self):
        return self.config.model

    def compute(self, texts):
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)


@pytest.fixture
def fake_embedders(monkeypatch):
    """``embedder_for`` making fakes (a list of what it made), stores as ("store", path); no embedder kept after."""
    made = []

    def make(config, store):
        made.append(FakeEmbedder(config, store))
        return made[-1]

    monkeypatch.setattr(shared, "_make", make)
    monkeypatch.setattr(shared, "store_at", lambda path: ("store", path))
    with MEMORY.isolated("embedders"):
        yield made


def test_one_embedder_per_model_and_store_its_batch_size_the_latest_asked(fake_embedders):
    first = embedder_for(RUN)
    assert embedder_for(dataclasses.replace(RUN, batch_size=99)) is first and first.batch_size == 99
    other_model = embedder_for(dataclasses.replace(RUN, model="other"))
    stored = embedder_for(RUN, store="/tmp/a.sqlite")
    assert embedder_for(RUN, store="/tmp/a.sqlite") is stored
    assert len({id(first), id(other_model), id(stored)}) == 3 and len(fake_embedders) == 3
    assert first.given_store is None and stored.given_store == ("store", "/tmp/a.sqlite")


def test_the_runs_store_applies_in_the_block_an_own_store_wins_and_counts_sum_over_embedders(fake_embedders):
    with use_store("/runs/e.sqlite"):
        in_run = embedder_for(RUN)
        own = embedder_for(RUN, store="/own/e.sqlite")
    assert in_run.given_store == ("store", "/runs/e.sqlite") and own.given_store == ("store", "/own/e.sqlite")
    assert embedder_for(RUN).given_store is None  # after the block: in memory only, another embedder
    in_run.raw(["ab", "ab", "abc"])  # 2 computed, 1 from memory
    own.raw(["x"])
    assert embedding_counts() == {"computed": 3, "stored": 0, "memory": 1, "unique": 3}
