"""The local relation classifier's embedding step, a scikit-learn transformer (a module of its own: scikit-learn is
imported when a classifier is built or loaded, not by every command)."""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from opi.schemas import EmbeddingConfig


class SentenceEmbeddingFeatures(TransformerMixin, BaseEstimator):
    """A scikit-learn transformer: texts -> unit sentence embeddings from the shared (cached) embedder.

    It stores only the model's name, so a fitted pipeline pickles small and reloads anywhere the model is installed.
    """

    def __init__(self, model: str = EmbeddingConfig.model, device: str = EmbeddingConfig.device,
                 settings: dict | None = None):
        self.model = model
        self.device = device
        self.settings = settings  # an endpoint's settings (EmbeddingConfig fields); None for a local model

    def fit(self, texts, y=None) -> "SentenceEmbeddingFeatures":
        return self

    def transform(self, texts) -> np.ndarray:
        from opi.embeddings import embedder_for, shared_embedder

        settings = getattr(self, "settings", None)  # a pipeline pickled before endpoints has none
        # settings without api_key_env: pickled when a keyless endpoint's null was left out, so none, not the default
        embedder = (embedder_for(EmbeddingConfig(**{"api_key_env": None, **settings})) if settings
                    else shared_embedder(self.model, self.device))
        return embedder.encode([str(t) for t in texts])
