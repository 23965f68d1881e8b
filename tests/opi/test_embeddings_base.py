"""The embedder base (``opi.embeddings.base.Embedder``) with a fake in-process model: each distinct text computed once
and its vector reused from memory, the counts (``texts_embedded``, ``cache_hits``, ``store_hits``, ``unique_texts``)
worked out by hand, unit vectors only in the normalised view, the texts to compute sent in slices of
``slice_texts``, and stored vectors of another length than the model's treated as misses. The real model's
behaviour is in tests/opi/test_embeddings.py, the persistent store's in tests/opi/test_embedding_store.py and
tests/opi/test_store_faults.py, and the per-block work counts in tests/opi/test_embedding_work.py."""
import numpy as np
import pytest

from opi.embeddings import Embedder
from opi.embeddings.base import ModelUnavailable


class TableEmbedder(Embedder):
    """Vectors looked up in a table of text -> raw vector; each call's texts are recorded."""

    def __init__(self, table, normalize=True, store=None, slice_texts=None):
        super().__init__(batch_size=2, normalize=normalize, store=store)
        self.table, self.calls = table, []
        if slice_texts:
            self.slice_texts = slice_texts

    @property
    def key(self):
        return "table-v1"

    @property
    def name(self):
        return "table"

    def compute(self, texts):
        self.calls.append(list(texts))
        return np.array([self.table[t] for t in texts], dtype=np.float32)


class DictStore:
    """Stands in for the persistent store: ``get`` answers from a dict, ``put`` records what was written."""

    def __init__(self, held):
        self.held, self.written = held, []

    def get(self, key, texts):
        return {t: np.asarray(self.held[t], dtype=np.float32) for t in texts if t in self.held}

    def put(self, key, pairs):
        self.written.extend(text for text, _ in pairs)


TABLE = {"a": [3.0, 4.0], "b": [0.0, 2.0], "c": [1.0, 0.0], "d": [5.0, 12.0], "e": [8.0, 6.0]}


def test_each_distinct_text_is_computed_once_and_reused_from_memory_with_the_counts():
    embedder = TableEmbedder(TABLE)
    first = embedder.raw(["a", "b", "a"])
    assert embedder.calls == [["a", "b"]]  # the repeat within a call is not computed twice
    assert (embedder.texts_embedded, embedder.cache_hits, embedder.unique_texts) == (2, 1, 2)
    np.testing.assert_array_equal(first, [[3, 4], [0, 2], [3, 4]])
    second = embedder.raw(["b", "c", "b"])
    assert embedder.calls == [["a", "b"], ["c"]]  # b from memory, c computed
    assert (embedder.texts_embedded, embedder.cache_hits, embedder.unique_texts) == (3, 3, 3)
    assert embedder.store_hits == 0 and second.dtype == np.float32
    np.testing.assert_array_equal(second, [[0, 2], [1, 0], [0, 2]])


def test_unit_vectors_only_in_the_normalised_view_and_the_langchain_view_follows_the_setting():
    embedder = TableEmbedder(TABLE)
    np.testing.assert_allclose(embedder.encode(["a", "d"]), [[0.6, 0.8], [5 / 13, 12 / 13]], rtol=1e-6)
    np.testing.assert_array_equal(embedder.encode(["a"], normalize=False), [[3, 4]])
    np.testing.assert_allclose(embedder.embed_query("e"), [0.8, 0.6], rtol=1e-6)
    raw = TableEmbedder(TABLE, normalize=False)
    assert raw.embed_documents(["a", "b"]) == [[3.0, 4.0], [0.0, 2.0]]
    np.testing.assert_allclose(raw.encode(["b"], normalize=True), [[0.0, 1.0]])
    assert embedder.texts_embedded == 3 and raw.texts_embedded == 2  # the views share the raw vectors


def test_texts_to_compute_go_in_slices_of_slice_texts_in_order_of_first_appearance():
    embedder = TableEmbedder(TABLE, slice_texts=2)
    vectors = embedder.raw(["e", "a", "e", "b", "c", "d"])
    assert embedder.calls == [["e", "a"], ["b", "c"], ["d"]]  # 5 distinct texts: 2 + 2 + 1
    assert embedder.texts_embedded == 5 and embedder.cache_hits == 1
    np.testing.assert_array_equal(vectors[:, 0], [8, 3, 8, 0, 1, 5])


def test_stored_vectors_are_reused_and_counted_and_only_the_rest_computed_and_written():
    store = DictStore({"a": [3.0, 4.0], "c": [1.0, 0.0]})
    embedder = TableEmbedder(TABLE, store=store)
    embedder.raw(["a", "b", "c", "a"])
    assert embedder.calls == [["b"]] and store.written == ["b"]
    assert (embedder.store_hits, embedder.texts_embedded, embedder.cache_hits, embedder.unique_texts) == (2, 1, 1, 3)
    assert embedder.work_counts() == {"texts_embedded": 1.0, "texts_from_embedding_store": 2.0}


def test_a_stored_vector_of_another_length_is_a_miss_the_most_common_length_or_the_held_one_decides():
    # nothing held yet: two stored vectors of length 2 against one of length 3, so the length-3 one is computed
    fresh = TableEmbedder(TABLE, store=DictStore({"a": [3.0, 4.0], "b": [9.0, 9.0, 9.0], "c": [1.0, 0.0]}))
    np.testing.assert_array_equal(fresh.raw(["a", "b", "c"]), [[3, 4], [0, 2], [1, 0]])
    assert fresh.calls == [["b"]] and fresh.store_hits == 2
    # a vector already held fixes the length, even against a majority of another length
    held = TableEmbedder(TABLE, store=DictStore({"b": [0.0, 2.0], "c": [7.0, 7.0, 7.0], "d": [7.0, 7.0, 7.0]}))
    held._cache["a"] = np.array([3.0, 4.0], dtype=np.float32)
    held.raw(["b", "c", "d"])
    assert held.calls == [["c", "d"]] and held.store_hits == 1


def test_a_model_whose_vectors_changed_length_under_its_name_is_one_line_not_a_crash():
    # an endpoint now serving another model under the same name: its stored 2-long vectors, its new 3-long ones
    changed = TableEmbedder({"b": [1.0, 2.0, 3.0]}, store=DictStore({"a": [3.0, 4.0], "c": [1.0, 0.0]}))
    with pytest.raises(ModelUnavailable, match=r"^the embedding model table now gives vectors of 3 numbers, and those "
                                               r"already held for it \(this run's, or the embedding store's\) have 2: "
                                               r"the model behind the name changed"):
        changed.raw(["a", "b", "c"])  # was numpy's "all input arrays must have the same shape"
    assert changed.store.written == []  # nothing of the new kind kept beside the old


def test_the_width_of_no_text_comes_from_a_known_vector_not_a_new_request(tmp_path):
    from opi.embeddings import EmbeddingStore

    table = {"a": [1.0, 0.0, 0.0], "dimension": [0.0, 0.0, 1.0]}
    model = TableEmbedder(table)
    model.raw(["a"])
    assert model.raw([]).shape == (0, 3) and model.calls == [["a"]]  # from the vector it has
    store = EmbeddingStore(tmp_path / "e.sqlite")
    TableEmbedder(table, store=store).raw(["a"])
    later = TableEmbedder(table, store=store)
    assert later.dimension == 3 and later.calls == []  # from the store's length: nothing asked
    fresh = TableEmbedder(table)
    assert fresh.dimension == 3 and fresh.calls == [["dimension"]]  # nothing known: one text embedded
