"""Embedding in a background process of the lowest priority: what it computes is in the store, read back (not
computed again) by the process that needs it, the same vectors as computed there."""
import os

import numpy as np

from opi.embeddings.background import BackgroundEmbedder
from opi.embeddings.shared import embedder_for
from opi.schemas import EmbeddingConfig


def test_what_the_background_process_embeds_is_read_from_the_store_where_it_is_needed(tmp_path):
    store, texts = str(tmp_path / "embeddings.sqlite"), ["The cat sat on the mat.", "Rain is expected tomorrow."]
    background = BackgroundEmbedder()
    try:
        first = background.embed(EmbeddingConfig(), store, texts)
        again = background.embed(EmbeddingConfig(), store, texts[1:])
        niceness = background._pool.submit(os.nice, 0).result()
        pid = background._pool.submit(os.getpid).result()
    finally:
        background.close()
    assert first["texts_embedded"] == 2 and again["texts_embedded"] == 0
    assert niceness == 19 and pid != os.getpid()
    here = embedder_for(EmbeddingConfig(), store)
    vectors = here.raw(texts)
    assert here.texts_embedded == 0 and here.store_hits == 2
    np.testing.assert_allclose(vectors, embedder_for(EmbeddingConfig(batch_size=8)).compute(texts), atol=1e-5)
