import numpy as np


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
