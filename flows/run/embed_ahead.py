"""The next round's articles embedded while a race's round waits on its LLM endpoint (``race.embed_ahead``).

A round has two phases: the dense retrievers embed the round's new articles (both cores), then the configurations
wait on the reader's and classifier's endpoint, leaving the cores part idle. The texts the next round's dense
retrievers will ask for (its questions and the chunks of its articles, as ``opi.retrieval.rank_examples`` prepares
them) are known before it starts. A process of the lowest priority (``opi.embeddings.background``) embeds them
into the embedding store, a batch at a time, with the CPU time the round leaves idle, and the next round reads
them there. (Embedding them in a thread of the race's own process was measured slower: it took the cores from the
round's Python, and the round's configurations waited behind it for the model.) They are work ahead of need: if
every dense configuration of a chunking is dropped, they were spent for nothing; race.json counts them in its spent
either way (``texts_embedded_ahead``)."""
from __future__ import annotations

import contextvars
import dataclasses
import logging
import threading

from flows.run.data import load_data
from flows.run.identity import own_embedding
from flows.run.stages import articles_key
from opi.articles import prepare_articles
from opi.embeddings.background import BackgroundEmbedder
from opi.embeddings.shared import identity, store_at
from opi.embeddings.work import EmbeddingWork
from opi.memory import MEMORY
from opi.retrieval import indexes_of
from opi.schemas import EmbeddingConfig, OPIConfig

log = logging.getLogger("opi")


class EmbedAhead:
    """One thread at a time sending the round after the one started (``start``) to a background process of the
    lowest priority, a batch at a time; ``stop`` ends it within a batch, ``close`` also ends the process."""

    def __init__(self):
        self.work = EmbeddingWork()
        self.background = BackgroundEmbedder()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, configurations: list[OPIConfig]) -> None:
        """Embed, from now on, what the next round of ``configurations`` (a round's, checked) will ask for. The
        previous round's embedding ahead is stopped first: its round has started and embeds what is left itself."""
        self.stop()
        if not any(config.llm.endpoint and config.race.embed_ahead for config in configurations):
            return  # nothing waits on an endpoint: the cores are busy with the round's own work
        self._stop = threading.Event()
        self._thread = threading.Thread(target=contextvars.copy_context().run, name="opi-embed-ahead", daemon=True,
                                        args=(self._embed, configurations, self._stop))
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        self.stop()
        self.background.close()

    @property
    def texts_embedded(self) -> int:
        return int(self.work.counts.get("texts_embedded", 0.0))

    def _embed(self, configurations: list[OPIConfig], stop: threading.Event) -> None:
        try:
            for embedding, store, texts in upcoming_texts(configurations):
                for start in range(0, len(texts), embedding.batch_size):
                    if stop.is_set():
                        return
                    self.work.add(self.background.embed(embedding, store, texts[start:start + embedding.batch_size]))
        except Exception as error:  # noqa: BLE001 - work ahead of need: the round that needs it does it and says why
            log.debug("embedding the next round ahead stopped: %s", error)


def upcoming_texts(configurations: list[OPIConfig]) -> list[tuple[EmbeddingConfig, str, list[str]]]:
    """What the next round's dense retrievers of ``configurations`` will embed, by embedder (local model and
    store): each example's question and the chunks of its article. None past the last round, in corpus scope (the
    first round embeds the whole corpus) or with an embedding endpoint."""
    wanted: dict[tuple, tuple[EmbeddingConfig, str, dict[str, None]]] = {}
    for config in configurations:
        following = next_round(config)
        if following is None or config.retrieval.scope != "article":
            continue
        members = [m for m in config.members().values() if m.embeds and not m.live and not m.bound]
        if not members:
            continue
        texts, store = round_texts(following), config.paths.embedding_store
        for member in members:
            embedding = own_embedding(config, member)
            if embedding.provider == "openai-compatible":
                continue  # texts sent to an endpoint cost money, and would be wasted with a configuration dropped
            entry = wanted.setdefault((identity(embedding), store), (embedding, store, {}))
            entry[2].update(dict.fromkeys(texts))
    return [(embedding, store, list(texts)) for embedding, store, texts in wanted.values()]


def next_round(config: OPIConfig) -> OPIConfig | None:
    """A round job's configuration on the race's next round; None after the last."""
    dataset = config.dataset
    if dataset.rounds is None or dataset.rounds_to is None or dataset.rounds_to >= dataset.rounds:
        return None
    following = dataset.rounds_to + 1
    return dataclasses.replace(config, dataset=dataclasses.replace(dataset, rounds_from=following,
                                                                   rounds_to=following))


def round_texts(config: OPIConfig) -> list[str]:
    """What ``config``'s dense retrievers prepare (``opi.retrieval.rank_examples``): its examples' questions and the
    chunks of their articles, from the chunked articles this process keeps (``flows.run.stages.chunked_articles``),
    else those articles chunked here."""
    data = load_data(config)
    articles = MEMORY.get("chunked articles", articles_key(config, data))
    if articles is None:
        articles = prepare_articles(sorted({e.context for e in data.examples}), config.chunking.size,
                                    config.chunking.overlap, config.chunking.length, config.sentences.language,
                                    store=store_at(config.paths.embedding_store))
    _, indexes = indexes_of(data.examples, articles)
    chunks = dict.fromkeys(chunk.text for index in indexes.values() for chunk in index.chunks)
    return [*dict.fromkeys(example.question for example in data.examples), *chunks]
