"""One embedder (and so one memory of vectors) per model in a process, whoever asks: the retrievers, the reader,
the classifier's features and BERTSim share it when they name the same model; and a component's own embedding,
resolved against the run's."""
from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Mapping

from opi.embeddings.base import Embedder
from opi.embeddings.store import EmbeddingStore
from opi.memory import MEMORY
from opi.schemas import EmbeddingConfig

# the store of the run (``use_store``): a context variable, so that tasks setting it at once in threads of one
# process (a Dask worker's) do not undo each other's
_RUN_STORE: ContextVar[str | None] = ContextVar("opi_embedding_store", default=None)


@contextmanager
def use_store(path: str | None):
    """While in the block, the vectors of every embedder asked for (without a store of its own) are kept in the
    store at ``path`` (None: in memory only): a run says so around its stages, a stage task around its body (in
    threads started by the block with a copy of its context too)."""
    token = _RUN_STORE.set(path)
    try:
        yield
    finally:
        _RUN_STORE.reset(token)


def resolved(run: EmbeddingConfig, override: Any = None) -> EmbeddingConfig:
    """``run`` with the settings ``override`` gives (a component's ``embedding``, as its dataclass or the plain
    dict a built component holds: unset fields are None; an ``EmbeddingConfig``: already resolved, as it is).

    The key variable follows the server: a component on the run's endpoint (no ``base_url`` of its own, or the
    same) uses the run's ``api_key_env`` unless it gives one ('': none); a component naming another server gets
    the variable it names there, and none when it names none (null or ''): the run's key never goes to a server it
    was not meant for."""
    if isinstance(override, EmbeddingConfig):
        return override
    if dataclasses.is_dataclass(override):
        override = {f.name: getattr(override, f.name) for f in dataclasses.fields(override)}
    if not isinstance(override, Mapping):  # none (a component without settings of its own)
        return run
    names = {f.name for f in dataclasses.fields(run)}
    given = {name: value for name, value in override.items() if value is not None and name in names}
    if given.get("base_url", run.base_url) != run.base_url:
        given.setdefault("api_key_env", None)
    return dataclasses.replace(run, **given) if given else run


def identity(config: EmbeddingConfig) -> tuple:
    """The settings that make vectors differ (batch size only changes how many go through at once)."""
    return tuple((f.name, getattr(config, f.name)) for f in dataclasses.fields(config) if f.name != "batch_size")


def embedder_for(config: EmbeddingConfig, store: str | None = None) -> Embedder:
    """The process's embedder of ``config``, its vectors kept in the store at ``store`` (default: the run's,
    ``use_store``)."""
    store = store or _RUN_STORE.get()
    embedder = MEMORY.recall("embedders", (identity(config), store),
                             lambda: _make(config, store_at(store) if store else None))
    embedder.batch_size = config.batch_size
    return embedder


def run_store() -> EmbeddingStore | None:
    """The run's store (``use_store``), None when the run keeps nothing."""
    path = _RUN_STORE.get()
    return store_at(path) if path else None


def store_at(path: str) -> EmbeddingStore:
    return MEMORY.recall("embedding stores", path, lambda: EmbeddingStore(path))


def _make(config: EmbeddingConfig, store: EmbeddingStore | None) -> Embedder:
    if config.provider == "openai-compatible":
        from opi.embeddings.endpoint import EndpointEmbedder

        return EndpointEmbedder(config, store=store)
    from opi.embeddings.local import SentenceEmbedder

    return SentenceEmbedder(config.model, config.device, config.batch_size, backend=config.backend, store=store)


def shared_embedder(model: str = EmbeddingConfig.model, device: str = EmbeddingConfig.device,
                    batch_size: int | None = None, backend: str = EmbeddingConfig.backend,
                    store: str | None = None) -> Embedder:
    """The process's sentence-transformers embedder of ``model`` (``embedder_for`` by model name)."""
    config = EmbeddingConfig(model=model, device=device, backend=backend,
                             batch_size=batch_size or EmbeddingConfig.batch_size)
    return embedder_for(config, store)


def embedding_counts() -> dict[str, float]:
    """Texts computed, read from the store and reused in memory, over every embedder of this process since it
    started; and the endpoints' usage (``embedding_calls``, ``embedding_prompt_tokens``, ``embedding_cost_usd``,
    ...), summed. A block's own work, whatever else the process does: ``opi.embeddings.work.counting``."""
    embedders = MEMORY.values("embedders")
    counts = {"computed": sum(e.texts_embedded for e in embedders), "stored": sum(e.store_hits for e in embedders),
              "memory": sum(e.cache_hits for e in embedders), "unique": sum(e.unique_texts for e in embedders)}
    for embedder in embedders:
        usage = getattr(embedder, "usage", None)
        for name, value in (usage.as_metrics("embedding").items() if usage is not None else ()):
            counts[name] = counts.get(name, 0.0) + value
    return counts
