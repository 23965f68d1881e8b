"""The embedding work of a block (``opi.embeddings.counting``): each block sees its own texts, also when two threads
embed at once through one shared embedder; an endpoint's usage is counted the same way."""
import threading
import time

import numpy as np

from opi.embeddings import Embedder, EmbeddingStore, counting
from opi.llm.client import EmbeddingUsage


class SlowEmbedder(Embedder):
    """Vectors from the text's length, a few milliseconds per slice of two texts: calls from two threads
    interleave."""

    slice_texts = 2

    def __init__(self, store=None):
        super().__init__(batch_size=2, store=store)

    @property
    def key(self):
        return "slow-v1"

    @property
    def name(self):
        return "slow"

    def compute(self, texts):
        time.sleep(0.005)
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)


def embed_in_threads(embedder, texts_of: dict[str, list[list[str]]]) -> dict[str, dict[str, float]]:
    """Each thread's work: in a block of its own, its calls (one list of texts each), all threads started at once."""
    start, seen = threading.Barrier(len(texts_of)), {}

    def work(name):
        with counting() as block:
            start.wait()
            for texts in texts_of[name]:
                embedder.raw(texts)
                time.sleep(0.001)  # the other thread's call gets the embedder in between
        seen[name] = block.counts

    threads = [threading.Thread(target=work, args=(name,)) for name in texts_of]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return seen


def test_two_threads_embedding_at_once_each_count_only_their_own_texts():
    embedder = SlowEmbedder()
    first = [[f"first {i}", f"first {i} again"] for i in range(20)]
    second = [[f"second text {i}"] for i in range(30)]
    with counting() as outer:  # a block around both: the threads' blocks are their own
        seen = embed_in_threads(embedder, {"first": first, "second": second})
    assert seen["first"]["texts_embedded"] == 40 and seen["second"]["texts_embedded"] == 30
    assert embedder.texts_embedded == 70 and outer.counts == {}


def test_a_text_another_block_computed_is_no_work_of_this_one(tmp_path):
    store = EmbeddingStore(tmp_path / "e.sqlite")
    with counting() as first:
        SlowEmbedder(store).raw(["alpha", "beta"])
    shared = SlowEmbedder(store)
    with counting() as second:
        shared.raw(["alpha", "beta", "gamma"])
    with counting() as third:
        shared.raw(["gamma", "alpha"])  # this process has both: neither computed nor read
    assert first.counts == {"texts_embedded": 2.0, "texts_from_embedding_store": 0.0}
    assert second.counts == {"texts_embedded": 1.0, "texts_from_embedding_store": 2.0}
    assert third.counts == {"texts_embedded": 0.0, "texts_from_embedding_store": 0.0}


class UsageEmbedder(SlowEmbedder):
    """An endpoint's bookkeeping: a call and a token per text sent."""

    def __init__(self):
        super().__init__()
        self.usage = EmbeddingUsage(price_input_per_million=1e6)

    def compute(self, texts):
        with self.usage.lock:
            self.usage.calls += 1
            self.usage.http_requests += 1
            self.usage.prompt_tokens += len(texts)
            self.usage.texts += len(texts)
        return super().compute(texts)


def test_an_endpoints_usage_is_counted_per_block_too():
    embedder = UsageEmbedder()
    seen = embed_in_threads(embedder, {"first": [[f"a {i}"] for i in range(10)],
                                       "second": [[f"b {i}", f"c {i}"] for i in range(5)]})
    assert seen["first"]["embedding_calls"] == 10 and seen["first"]["embedding_prompt_tokens"] == 10
    assert seen["second"]["embedding_calls"] == 5 and seen["second"]["embedding_texts"] == 10
    assert seen["second"]["embedding_cost_usd"] == 10.0 and seen["first"]["embedding_retries"] == 0
    assert embedder.usage.calls == 15
