"""The next round's articles embedded while a race's round waits on its endpoint: exactly the texts the next round's
dense retrievers ask for, a batch at a time, stopped within one batch, counted; nothing for those that do not
embed, past the last round or where nothing waits on an endpoint."""
import dataclasses
import hashlib
import logging
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from flows.run import embed_ahead
from flows.run.config import compose_config, typed
from flows.run.data import load_data
from flows.run.embed_ahead import EmbedAhead, next_round, upcoming_texts
from opi import components
from opi.articles import prepare_articles
from opi.embeddings import Embedder, counting
from opi.retrieval import rank_examples
from opi.schemas import EmbeddingConfig


class HashEmbedder(Embedder):
    """Vectors from each text's hash; what it was asked to compute, kept."""

    def __init__(self, batch_size=64):
        super().__init__(batch_size=batch_size)
        self.computed: list[list[str]] = []

    @property
    def key(self):
        return "hash-v1"

    @property
    def name(self):
        return "hash"

    def compute(self, texts):
        self.computed.append(list(texts))
        return np.array([np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8) for t in texts],
                        dtype=np.float32)


def round_job(*overrides: str, number: int = 2):
    return typed(compose_config(["dataset=deeplogic-130", "dataset.rounds=10", f"dataset.rounds_from={number}",
                                 f"dataset.rounds_to={number}", *overrides]))


def test_the_next_round_finds_every_text_its_dense_retrievers_ask_for_already_embedded():
    config = round_job("setup=a_two")  # kNN and DPS: one model, so one list of texts
    ((embedding, store, texts),) = upcoming_texts([config])
    assert embedding == config.embedding and store == config.paths.embedding_store
    assert len(texts) == len(set(texts))
    embedder = HashEmbedder()
    embedder.raw(texts)
    following = next_round(config)
    data = load_data(following)
    articles = prepare_articles(data.contexts, following.chunking.size, following.chunking.overlap,
                                following.chunking.length)  # the whole pool, as the round's stage chunks it
    for member in following.members().values():
        rank_examples(components.with_resources(member, embedder=embedder), data.examples, articles, 4)
    assert embedder.computed == [texts]  # nothing more for the next round: not one text
    this_round = {e.question for e in load_data(config).examples}
    assert not this_round & set(texts)  # the round already running embeds its own


def test_nothing_is_embedded_ahead_for_retrievers_that_do_not_embed_past_the_last_round_over_a_corpus_or_paid():
    assert upcoming_texts([round_job("setup=bm25"), round_job("setup=tfidf")]) == []
    assert upcoming_texts([round_job("setup=knn", number=10)]) == [] and next_round(round_job(number=10)) is None
    assert upcoming_texts([round_job("setup=knn", "retrieval.scope=corpus")]) == []
    # an endpoint's embeddings are paid for
    assert upcoming_texts([round_job("setup=knn", "embedding=openai-compatible")]) == []
    assert next_round(typed(compose_config(["dataset=deeplogic-130"]))) is None  # not a race's round
    assert next_round(round_job(number=3)).dataset.rounds_from == 4


def waiting_on(endpoint: bool, ahead: bool = True):
    return SimpleNamespace(llm=SimpleNamespace(endpoint=endpoint), race=SimpleNamespace(embed_ahead=ahead))


class InProcess:
    """The background process's part, done here: into ``embedder``."""

    def __init__(self, embedder: Embedder):
        self.embedder, self.closed = embedder, False

    def embed(self, embedding, store, texts):
        with counting() as work:
            self.embedder.raw(texts)
        return work.counts

    def close(self):
        self.closed = True


@pytest.fixture
def ahead_of(monkeypatch):
    """An EmbedAhead embedding ``texts`` into ``embedder`` in batches of 2."""
    def make(texts: list[str], embedder: Embedder):
        monkeypatch.setattr(embed_ahead, "upcoming_texts", lambda configurations: [
            (EmbeddingConfig(batch_size=2), "store.sqlite", texts)])
        ahead = EmbedAhead()
        ahead.background = InProcess(embedder)
        return ahead
    return make


def test_embedding_ahead_goes_a_batch_at_a_time_is_counted_and_stops_within_a_batch(ahead_of):
    second, ahead = threading.Event(), None

    class Paced(HashEmbedder):
        def compute(self, texts):
            if len(self.computed) == 1:  # the second batch ends only once the stop is asked for
                second.set()
                assert ahead._stop.wait(10)
            return super().compute(texts)

    embedder = Paced()
    ahead = ahead_of([f"text {i}" for i in range(400)], embedder)
    ahead.start([waiting_on(endpoint=True)])
    assert second.wait(10)
    ahead.stop()
    assert embedder.computed == [["text 0", "text 1"], ["text 2", "text 3"]]  # the batch under way, then no more
    assert ahead.texts_embedded == 4
    ahead.stop()  # again: nothing to stop
    assert not ahead.background.closed  # kept for the next round
    ahead.close()
    assert ahead.background.closed


def test_starting_the_next_round_stops_the_previous_ones_embedding_ahead(ahead_of):
    embedder = HashEmbedder()
    ahead = ahead_of([f"text {i}" for i in range(4000)], embedder)
    ahead.start([waiting_on(endpoint=True)])
    first = ahead._thread
    ahead.start([waiting_on(endpoint=True)])
    assert not first.is_alive() and ahead._thread is not first
    ahead.stop()


@pytest.mark.parametrize("configuration", [waiting_on(endpoint=False), waiting_on(endpoint=True, ahead=False)])
def test_nothing_is_embedded_ahead_when_nothing_waits_on_an_endpoint_or_when_asked(ahead_of, configuration):
    embedder = HashEmbedder()
    ahead = ahead_of(["a", "b"], embedder)
    ahead.start([configuration])
    assert ahead._thread is None and embedder.computed == [] and ahead.texts_embedded == 0


def test_a_failure_ahead_is_left_to_the_round_that_needs_the_texts(ahead_of, caplog):
    class Broken(HashEmbedder):
        def compute(self, texts):
            raise RuntimeError("the model is gone")

    ahead = ahead_of(["a", "b", "c"], Broken())
    with caplog.at_level(logging.DEBUG, logger="opi"):
        ahead.start([waiting_on(endpoint=True)])
        ahead._thread.join(10)
    ahead.stop()
    assert ahead.texts_embedded == 0
    assert [r.getMessage() for r in caplog.records] == [
        "embedding the next round ahead stopped: the model is gone"]


def test_a_round_job_on_the_next_round_is_the_same_job_but_its_part_of_the_data():
    config = round_job("setup=knn", number=4)
    following = next_round(config)
    assert dataclasses.replace(following, dataset=config.dataset) == config
    assert (following.dataset.rounds_from, following.dataset.rounds_to) == (5, 5)
