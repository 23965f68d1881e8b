"""Readers turn (question, retrieved sentences) into an answer.

``ExtractiveReader`` is the offline default. It is not a language model and does not pretend to be: it answers
with the ``n_sentences`` retrieved sentences most similar to the question (cosine of sentence embeddings),
returned in article order. What it measures is how good the retrieved evidence is, which is what a retriever
comparison needs when no LLM is available. ``LLMReader`` is the paper's setting. A reader of your own subclasses
``Reader`` and implements ``answer(questions, sentence_lists, progress=None) -> list[str | None]``, named by
``llm.reader._target_``; it may take the resources ``embedder`` and ``client`` (the run's chat client, given when
``llm.model`` names an endpoint) as dataclass fields.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from opi.schemas import EmbeddingOverride


class Reader:
    """What the run asks of a reader: ``answer`` (one answer per question; None where the LLM gave none), and
    after it ``calls``, per example what was asked (prompt, cache hit, tokens) for the traces, or None."""

    calls: list[dict | None] | None = None

    def answer(self, questions: Sequence[str], sentence_lists: Sequence[Sequence[str]],
               progress: Callable[[int], None] | None = None) -> list[str | None]:
        raise NotImplementedError(f"{type(self).__name__} must implement answer(questions, sentence_lists, "
                                  "progress=None)")


@dataclass
class ExtractiveReader(Reader):
    n_sentences: int = 2
    embedding: EmbeddingOverride = field(default_factory=EmbeddingOverride)  # its model (unset: the run's embedding)
    embedder: Any = field(default=None, repr=False)

    def __post_init__(self):
        if self.n_sentences < 1:
            raise ValueError(f"n_sentences must be >= 1, got {self.n_sentences}")

    def answer(self, questions, sentence_lists, progress=None):
        # embedded in one call first: the model is several times faster per text on a few hundred texts at once
        # than on one example's handful
        self.embedder.raw([*questions, *(s for sentences in sentence_lists for s in sentences)])
        answers = []
        for question, sentences in zip(questions, sentence_lists):
            if not sentences:
                answers.append("")
                continue
            sims = self.embedder.encode(list(sentences)) @ self.embedder.encode([question])[0]
            best = np.argsort(-sims, kind="stable")[: self.n_sentences]
            answers.append(" ".join(sentences[i] for i in sorted(best)))
        return answers


def format_sentences(sentences: Sequence[str]) -> str:
    return "\n".join(f"- {s}" for s in sentences) if sentences else "(no sentences were retrieved)"


@dataclass
class LLMReader(Reader):
    """The paper's setting: the retrieved sentences and the question go to an LLM, which answers."""

    prompt: str = "answer"  # a prompt file in opi/llm/prompts/
    client: Any = field(default=None, repr=False)

    def messages(self, question: str, sentences: Sequence[str]) -> list[dict[str, str]]:
        from opi.llm.prompts import load_prompt

        return [{"role": "user", "content": load_prompt(self.prompt).render(sentences=format_sentences(sentences),
                                                                            question=question)}]

    def answer(self, questions, sentence_lists, progress=None):
        requests = [(self.messages(q, s), None) for q, s in zip(questions, sentence_lists)]
        answers = [a.strip() if a is not None else None for a in self.client.complete_many(requests, progress)]
        record_of = getattr(self.client, "record_of", None)  # a client of your own may not keep records
        records = [record_of(messages) if record_of else None for messages, _ in requests]
        self.calls = [{"prompt": messages[-1]["content"], **dataclasses.asdict(record)} if record else None
                      for (messages, _), record in zip(requests, records)]  # what each example's trace shows
        return answers
