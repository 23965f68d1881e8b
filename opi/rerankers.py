"""Rerankers: a second look at a ranking's first ``candidates`` chunks, reordered by a model that reads each
(question, chunk) pair, before the reader's ``k`` are taken.

Where the run applies one (``flows.run.stages.retrieve``): a single retriever's ranking; an A- combination's fused
ranking (the members' rankings each cut to ``candidates``, fused, its top ``candidates``); each member of an S-
combination before its top ``k`` joins the union. ``rerank=none`` (``NoReranker``) leaves the run as it is.

A reranker is a dataclass (``conf/rerank/<option>.yaml`` names it by ``_target_``): ``scores(question, texts)``
gives one score per text (higher is better), or ``score_many`` the scores of many questions at once (one model
call over every pair, for a cross-encoder). It may take the resource ``client`` (the run's LLM client). A reranker
that loads a model here names the settings that name it in ``local_models`` (a folder, a packaged or a hub model),
so a model that is not there is said before the data loads. A reranker of your own:
``opi-eval rerank=custom rerank._target_=my_pkg.MyReranker``.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, ClassVar, Mapping, Optional, Sequence

from opi.articles import Article
from opi.chunking import document_id
from opi.data import Example
from opi.retrievers.base import Ranking

Scores = list[Optional[float]]  # one per candidate; None: no score (an LLM reply that could not be read)


@dataclass
class NoReranker:
    """``rerank=none``: the retrievers' own order (nothing is asked, the run is the same as without rerankers)."""

    name: str = "none"


@dataclass
class Reranker:
    """Reorders a question's candidate chunks by their scores."""

    name: str = "reranker"
    candidates: int = 20  # chunks read per question (and ranked this deep at least), then cut to k
    excluded_from_keys: ClassVar[tuple[str, ...]] = ("name",)  # a label: scores do not depend on it
    local_models: ClassVar[tuple[str, ...]] = ()  # settings naming models to load, checked before the run
    parse_failures: ClassVar[int] = 0  # replies it could not read (an LLM reranker counts its own)

    @property
    def asks_llm(self) -> bool:
        """Sends prompts through the run's LLM endpoint: it takes the ``client`` resource (its replies are kept call
        by call in the LLM call cache; its stage result is not kept whole)."""
        from opi.components import accepted

        return "client" in accepted(type(self), ["client"])

    @property
    def llm_model(self) -> Optional[str]:
        """The model it asks on the run's endpoint, where it asks another than ``llm.model``."""
        return None

    def content_key(self) -> Optional[str]:
        """What its scores depend on besides its settings (a local model's files), for the cache key; None: nothing."""
        return None

    def __post_init__(self):
        if not isinstance(self.candidates, int) or self.candidates < 1:
            raise ValueError(f"candidates must be >= 1, got {self.candidates}")

    def scores(self, question: str, texts: list[str]) -> Scores:
        """One score per text, higher is better; or override ``score_many``."""
        raise NotImplementedError(f"{type(self).__name__} implements neither scores() nor score_many()")

    def score_many(self, questions: list[str], text_lists: list[list[str]],
                   progress: Callable[[int], None] | None = None) -> list[Scores]:
        """The scores of each question's texts; ``progress`` is told of each pair scored."""
        results = []
        for question, texts in zip(questions, text_lists):
            results.append(self.scores(question, texts))
            if progress:
                progress(len(texts))
        return results


def reranks(reranker: Any) -> bool:
    """Whether ``reranker`` changes anything (``rerank=none`` does not)."""
    return reranker is not None and not isinstance(reranker, (NoReranker, str))


def reranked(ranking: Ranking, scores: Scores) -> Ranking:
    """``ranking``'s chunks by descending score; ties, and chunks without a score (last), keep the ranking's order."""
    if len(scores) != len(ranking.chunk_ids):
        raise ValueError(f"the reranker gave {len(scores)} scores for {len(ranking.chunk_ids)} candidates")
    values = [float(s) if s is not None and not math.isnan(float(s)) else None for s in scores]
    order = sorted(range(len(values)), key=lambda i: (values[i] is None, -(values[i] or 0.0)))
    return Ranking(tuple(ranking.chunk_ids[i] for i in order),
                   tuple(values[i] if values[i] is not None else math.nan for i in order))


def candidate_texts(example: Example, articles: Mapping[str, Article], ranking: Ranking) -> list[str]:
    chunks = articles[document_id(example.context)].chunks
    return [chunks[i].text for i in ranking.chunk_ids]


def rerank_examples(reranker: Reranker, pools: Mapping[str, Ranking], examples: Sequence[Example],
                    articles: Mapping[str, Article], progress: Callable[[int], None] | None = None
                    ) -> tuple[dict[str, Ranking], int]:
    """Each example's candidates (``pools``, by example id) reranked, and how many candidates got no score."""
    wanted = [e for e in examples if e.id in pools]
    text_lists = [candidate_texts(e, articles, pools[e.id]) for e in wanted]
    score_many = getattr(reranker, "score_many", None) or (lambda *args: Reranker.score_many(reranker, *args))
    results = score_many([e.question for e in wanted], text_lists, progress)
    if len(results) != len(wanted):
        raise ValueError(f"{type(reranker).__name__} scored {len(results)} questions of {len(wanted)}")
    rankings = {e.id: reranked(pools[e.id], scores) for e, scores in zip(wanted, results)}
    return rankings, sum(math.isnan(s) for ranking in rankings.values() for s in ranking.scores)


def candidate_pools(combination: Any, deep: Sequence[Mapping[str, Ranking]], candidates: int
                    ) -> dict[str, Ranking] | None:
    """The chunks a reranker reads for a combination with an order of its own (A-: the members' rankings each cut to
    ``candidates``, fused, the fused top ``candidates``), by example id; None for one without (S-)."""
    if not combination.ordered:
        return None
    return {example_id: combination.ranking([m[example_id] for m in deep],
                                            [m[example_id].top(candidates) for m in deep]).top(candidates)
            for example_id in deep[0]}


@dataclass
class CrossEncoderReranker(Reranker):
    """A sentence-transformers ``CrossEncoder`` (a hub name or a local folder) scores every (question, chunk) pair,
    in one ``predict`` call for all questions."""

    local_models: ClassVar[tuple[str, ...]] = ("model",)
    name: str = "cross-encoder"
    model: str = "cross-encoder/ms-marco-MiniLM-L6-v2"
    device: str = "cpu"
    batch_size: int = 32
    max_length: Optional[int] = None  # tokens a pair is cut to (null: the model's own limit)

    def __post_init__(self):
        super().__post_init__()
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be >= 1 or null, got {self.max_length}")

    def score_many(self, questions: list[str], text_lists: list[list[str]],
                   progress: Callable[[int], None] | None = None) -> list[Scores]:
        pairs = [(question, text) for question, texts in zip(questions, text_lists) for text in texts]
        flat = cross_encoder(self.model, self.device, self.max_length).predict(
            pairs, batch_size=self.batch_size, show_progress_bar=False) if pairs else []
        if progress:
            progress(len(pairs))
        results, start = [], 0
        for texts in text_lists:
            results.append([float(s) for s in flat[start:start + len(texts)]])
            start += len(texts)
        return results

    def content_key(self) -> str:
        """The model's files' hash (a local folder, a downloaded hub model), or its name: what its scores depend on."""
        from opi.embeddings.local import folder_hash, model_folder

        folder = model_folder(self.model)
        return folder_hash(folder) if folder is not None else f"name:{self.model}"


@lru_cache(maxsize=2)
def cross_encoder(model: str, device: str, max_length: int | None):
    """A loaded cross-encoder, once per process for every configuration of a sweep."""
    from sentence_transformers import CrossEncoder

    from opi.embeddings.local import unavailable

    try:
        return CrossEncoder(model, device=device, max_length=max_length)
    except (OSError, ValueError) as err:  # not downloaded and the hub unreachable, or no model (or a damaged one)
        raise unavailable(model, err, "cross-encoder") from err


RELEVANCE = tuple(range(11))  # the LLM's scale: 0 (unrelated) to 10 (holds the answer)


@dataclass
class LLMReranker(Reranker):
    """The run's LLM endpoint rates each (question, chunk) pair 0-10 (prompt ``opi/llm/prompts/rerank.txt``, a JSON
    schema with the scale as an enum). A reply that cannot be read is asked again ``parse_retries`` times, then has
    no score (the candidate goes after those scored, in the retriever's order). Replies are in the LLM call cache:
    a run asked again pays nothing."""

    name: str = "llm-rerank"
    parse_retries: int = 2
    model: Optional[str] = None  # another model on the run's endpoint (null: llm.model)
    prompt: str = "rerank"
    client: Any = field(default=None, repr=False)

    def __post_init__(self):
        super().__post_init__()
        if self.parse_retries < 0:
            raise ValueError(f"parse_retries must be >= 0, got {self.parse_retries}")
        self.parse_failures = 0

    @property
    def llm_model(self) -> Optional[str]:
        return self.model

    def messages(self, question: str, text: str) -> list[dict[str, str]]:
        from opi.llm.prompts import load_prompt

        content = load_prompt(self.prompt).render(question=question, passage=text, low=str(RELEVANCE[0]),
                                                  high=str(RELEVANCE[-1]))
        return [{"role": "user", "content": content}]

    def score_many(self, questions: list[str], text_lists: list[list[str]],
                   progress: Callable[[int], None] | None = None) -> list[Scores]:
        from opi.llm.client import json_reply_format, object_schema

        if self.client is None:
            raise ValueError(f"{type(self).__name__} needs the run's LLM client")
        conversations = [self.messages(q, t) for q, texts in zip(questions, text_lists) for t in texts]
        reply_format = json_reply_format("relevance", object_schema(
            relevance={"type": "integer", "enum": list(RELEVANCE)}))
        flat, failures = self.client.ask_json(conversations, reply_format, parse_relevance, self.parse_retries,
                                              f'Reply with only {{"relevance": <an integer from {RELEVANCE[0]} to '
                                              f'{RELEVANCE[-1]}>}}', progress)
        self.parse_failures += failures
        results, start = [], 0
        for texts in text_lists:
            results.append(list(flat[start:start + len(texts)]))
            start += len(texts)
        return results


def parse_relevance(reply: str) -> float | None:
    """A rating from a reply: JSON ``{"relevance": n}`` (possibly inside other text) or a bare number on the scale."""
    text = reply.strip()
    for candidate in [text, *re.findall(r"\{[^{}]*\}", text)]:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            value = value.get("relevance")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and RELEVANCE[0] <= value <= RELEVANCE[-1]:
            return float(value)
    return None
