"""The yardstick: the embedding model BERTSim is measured with (``metrics.similarity``), named by its content. Two
runs' BERTSim (and so their OPI) are comparable only when their yardsticks are the same."""
from __future__ import annotations

from typing import Mapping

from opi.schemas import EmbeddingConfig

TAG, MODEL_TAG = "opi.yardstick", "opi.yardstick_model"


def yardstick_tags(similarity: EmbeddingConfig) -> dict[str, str]:
    from opi.embeddings import embedder_for

    embedder = embedder_for(similarity)
    return {TAG: embedder.key, MODEL_TAG: embedder.name}


def mixed(runs: Mapping[str, Mapping[str, str]], what: str) -> str | None:
    """One line saying which yardsticks ``runs`` (name -> tags) were measured with, when they are not all the
    same; None when they are (runs logged before yardsticks were tagged are left out)."""
    models: dict[str, set[str]] = {}
    for name, tags in runs.items():
        if TAG in tags:
            models.setdefault(tags[TAG], set()).add(f"{tags.get(MODEL_TAG, '?')}")
    if len(models) < 2:
        return None
    counts = {key: sum(tags.get(TAG) == key for tags in runs.values()) for key in models}
    described = "; ".join(f"{'/'.join(sorted(models[key]))} ({short_key(key)}) in {counts[key]} run(s)"
                          for key in models)
    return (f"{what} measure BERTSim with different yardsticks (metrics.similarity): {described}. Their BERTSim and "
            "OPI are not comparable: compare runs of one yardstick (set metrics.similarity.model the same)")


def short_key(key: str) -> str:
    """A yardstick's key as a message shows it: its backend and the first 12 characters of its digest
    ("sentence-transformers:51ec9c19d2a4"), not a cut through a word."""
    backend, _, digest = key.rpartition(":")
    return f"{backend}:{digest[:12]}" if backend else key[:40]
