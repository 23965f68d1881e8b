"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (``embedding.provider=openai-compatible``).

Requests go through the chat client's ``Endpoint`` (``opi.llm.client``): the same retries within the deadline,
``Retry-After``, rate and token limits, and one ``LLMError`` line for every fault. ``embedding.batch_size`` texts go
in one request, ``embedding.concurrency`` requests at a time; the vectors come back in input order whatever order
the requests end and the reply lists them in. There is no call cache: the embedding store (``opi.embeddings.store``)
keeps every vector under ``key``, so a text is sent once across runs.
"""
from __future__ import annotations

import threading
from functools import partial
from typing import Any

import numpy as np

from opi.embeddings.base import Embedder
from opi.embeddings.store import EmbeddingStore
from opi.llm.client import EmbeddingUsage, Endpoint, in_parallel, parsed_reply
from opi.llm.faults import LLMError
from opi.schemas import EmbeddingConfig
from opi.secrets import url_without_credentials

OPENAI_URL = "https://api.openai.com/v1"
REQUESTS_PER_SLICE = 4  # per worker, between checks for an exiting process
# texts that differ beyond case and spacing, which some models ignore ("Hello" and "hello " may share a vector): this
# many getting one vector is an endpoint that embeds nothing
DISTINCT = 3


def distinct(texts: list[str]) -> int:
    return len({" ".join(text.lower().split()) for text in texts})


class EndpointEmbedder(Embedder):
    """``group``: the config path of ``config`` (``embedding``, ``metrics.similarity``), which messages name."""

    def __init__(self, config: EmbeddingConfig, normalize: bool = True, store: EmbeddingStore | None = None,
                 group: str = "embedding"):
        super().__init__(config.batch_size, normalize, store)
        self.config = config
        self.usage = EmbeddingUsage(price_input_per_million=config.price_input_per_million)
        self.endpoint = Endpoint(config, self.usage, group, "embedding",
                                 request_settings=("model", "dimensions", "batch_size"))
        self._length = config.dimensions  # of every vector: the one asked for, else the first reply's
        self._length_lock = threading.Lock()

    @property
    def key(self) -> str:
        address = url_without_credentials(self.config.base_url or OPENAI_URL).rstrip("/")
        return f"openai-compatible:{address}:{self.config.model}:{self.config.dimensions}:raw"

    @property
    def name(self) -> str:
        return f"{self.config.model} at {self.endpoint.where}"

    @property
    def slice_texts(self) -> int:
        return self.batch_size * self.config.concurrency * REQUESTS_PER_SLICE

    @property
    def dimension(self) -> int:
        return self.config.dimensions or super().dimension

    def compute(self, texts: list[str]) -> np.ndarray:
        batches = [texts[start:start + self.batch_size] for start in range(0, len(texts), self.batch_size)]
        replies = in_parallel([partial(self._embed, batch) for batch in batches], self.config.concurrency,
                              name="opi-embedding")
        if not replies:
            return np.zeros((0, self._length or 0), dtype=np.float32)
        vectors = np.concatenate(replies)
        if len(replies) > 1 and distinct(texts) >= DISTINCT and (vectors == vectors[0]).all():  # a text a request
            raise self._unusable(f"the same vector for all {len(texts)} texts, {distinct(texts)} of them different")
        return vectors

    def _embed(self, batch: list[str]) -> np.ndarray:
        with self.usage.lock:
            self.usage.calls += 1
        asked = {"dimensions": self.config.dimensions} if self.config.dimensions else {}
        return self.endpoint.call(
            lambda client, timeout: client.embeddings.with_raw_response.create(
                model=self.config.model, input=batch, encoding_format="float", timeout=timeout, **asked),
            partial(self._vectors, texts=batch))

    def _vectors(self, raw, texts: list[str]) -> np.ndarray:
        """The reply's vectors in input order, or an LLMError saying what is wrong with them: besides the shape,
        a vector of zeros (no direction: its cosine is undefined) and one vector for ``DISTINCT`` or more different
        texts (every text the same: a broken endpoint) are refused."""
        count = len(texts)
        parsed = parsed_reply(raw)
        data = getattr(parsed, "data", None)
        if not isinstance(data, list):
            raise self.endpoint.wrong_reply(raw, parsed, "an embeddings reply", "data")
        self._count(getattr(parsed, "usage", None), count)
        if len(data) != count:
            raise self._unusable(f"{len(data)} vectors for {count} texts")
        by_index = {getattr(item, "index", None): getattr(item, "embedding", None) for item in data}
        if set(by_index) != set(range(count)):
            raise self._unusable(f"vectors numbered {sorted(by_index, key=str)[:5]} for texts 0 to {count - 1}")
        vectors = np.stack([self._vector(by_index[index], index) for index in range(count)])
        if distinct(texts) >= DISTINCT and (vectors == vectors[0]).all():
            raise self._unusable(f"the same vector for all {count} texts of a request, {distinct(texts)} of them "
                                 "different")
        return vectors

    def _count(self, usage: Any, texts: int) -> None:
        tokens = getattr(usage, "prompt_tokens", None) or getattr(usage, "total_tokens", None) or 0
        with self.usage.lock:
            self.usage.prompt_tokens += tokens
            self.usage.texts += texts

    def _vector(self, values: Any, index: int) -> np.ndarray:
        try:
            vector = np.asarray(values, dtype=np.float32)
        except (TypeError, ValueError):
            vector = None
        if vector is None or vector.ndim != 1 or not len(vector) or not np.isfinite(vector).all():
            raise self._unusable(f"vector {index} is not a list of finite numbers")
        if not vector.any():
            raise self._unusable(f"vector {index} is all zeros")
        with self._length_lock:
            self._length = self._length or len(vector)
            expected = self._length
        if len(vector) != expected:
            raise self._unusable(f"vector {index} has {len(vector)} numbers, not {expected}")
        return vector

    def _unusable(self, problem: str) -> LLMError:
        group = self.endpoint.group
        return LLMError(f"{self.endpoint.where} sent embeddings of model {self.config.model!r} that OPI cannot use "
                        f"({problem}): check {group}.model and {group}.dimensions, and that {group}.base_url "
                        f"serves OpenAI-compatible embeddings")
