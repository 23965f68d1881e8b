"""opi.relation_features: the classifier's embedding step, a scikit-learn transformer that stores only the model's
name and embeds with the process's shared embedder."""
import pickle

import numpy as np
from sklearn.base import clone

from opi.relation_features import SentenceEmbeddingFeatures
from opi.schemas import EmbeddingConfig


def test_the_defaults_are_the_embedding_configs():
    step = SentenceEmbeddingFeatures()
    assert step.get_params() == {"model": EmbeddingConfig.model, "device": EmbeddingConfig.device, "settings": None}
    assert clone(SentenceEmbeddingFeatures("other-model")).get_params()["model"] == "other-model"


def test_it_pickles_small_whatever_it_embedded(embedder):
    step = SentenceEmbeddingFeatures()
    step.fit_transform(["When did the mill open?"])
    assert step.fit(["anything"]) is step  # nothing to learn
    assert len(pickle.dumps(step)) < 500  # the model's name, not the model


def test_texts_become_the_shared_embedders_unit_vectors(embedder):
    texts = ["When did the mill open?", "Because the river silted up.", 1850]
    vectors = SentenceEmbeddingFeatures().transform(texts)
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(vectors[2], embedder.encode(["1850"])[0], rtol=1e-5, atol=1e-6)  # not text: its str()
    before = embedder.texts_embedded
    SentenceEmbeddingFeatures().transform(texts[:2])
    assert embedder.texts_embedded == before  # the same process-wide cache as the retrievers and the reader
