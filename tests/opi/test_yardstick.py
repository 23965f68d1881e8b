"""The yardstick (``opi.yardstick``): the tags naming the model BERTSim is measured with, for an endpoint model
(no model loaded, nothing asked of the network) its content key without the credentials of its address and its
name with them redacted; and the one line saying which yardsticks a set of runs mixes: None when they are one (runs
logged before yardsticks were tagged left out), else each key's models, its last 40 characters and its runs. Runs
measured with different yardsticks end to end are in ``tests/flows/test_yardstick.py``."""
from opi.schemas import EmbeddingConfig
from opi.yardstick import MODEL_TAG, TAG, mixed, short_key, yardstick_tags

MINILM = {TAG: "sentence-transformers:k1", MODEL_TAG: "packaged:all-MiniLM-L6-v2"}
MPNET = {TAG: "sentence-transformers:k2", MODEL_TAG: "all-mpnet-base-v2"}


def test_an_endpoint_yardstick_is_keyed_without_the_credentials_of_its_address():
    similarity = EmbeddingConfig(provider="openai-compatible", model="emb-3",
                                 base_url="http://user:secret@127.0.0.1:9/v1/", dimensions=256)
    tags = yardstick_tags(similarity)
    assert tags == {TAG: "openai-compatible:http://127.0.0.1:9/v1:emb-3:256:raw",
                    MODEL_TAG: "emb-3 at http://***@127.0.0.1:9/v1/"}
    assert "secret" not in str(tags)


def test_runs_of_one_yardstick_or_untagged_runs_are_not_mixed():
    assert mixed({}, "the runs") is None
    assert mixed({"a": MINILM, "b": dict(MINILM)}, "the runs") is None
    assert mixed({"a": MINILM, "old": {}, "older": {MODEL_TAG: "x"}}, "the runs") is None  # no key: left out


def test_mixed_yardsticks_are_said_with_their_models_and_their_runs():
    line = mixed({"a": MINILM, "b": MPNET, "c": MINILM, "old": {}}, "the runs of sweep s1")
    assert line == ("the runs of sweep s1 measure BERTSim with different yardsticks (metrics.similarity): "
                    "packaged:all-MiniLM-L6-v2 (sentence-transformers:k1) in 2 run(s); all-mpnet-base-v2 "
                    "(sentence-transformers:k2) in 1 run(s). Their BERTSim and OPI are not comparable: compare "
                    "runs of one yardstick (set metrics.similarity.model the same)")


def test_a_long_key_is_cut_to_its_backend_and_digest_start_and_models_of_one_key_are_joined():
    key = "sentence-transformers:" + "0123456789" * 5  # 72 characters
    line = mixed({"a": {TAG: key, MODEL_TAG: "b-model"}, "b": {TAG: key, MODEL_TAG: "a-model"},
                  "c": {TAG: "k9"}}, "runs")
    assert "a-model/b-model (sentence-transformers:012345678901) in 2 run(s); ? (k9) in 1 run(s)." in line


def test_a_yardstick_key_is_shown_by_its_backend_and_the_start_of_its_digest():
    # key[-40:] cut through the backend's name ("rmers:51ec9c19...")
    long = "sentence-transformers:" + "51ec9c19" * 8
    assert short_key(long) == "sentence-transformers:51ec9c1951ec" and short_key("k1") == "k1"
