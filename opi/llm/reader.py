"""Readers turn (question, retrieved sentences) into an answer.

``ExtractiveReader`` is the offline default. It is not a language model and does not pretend to be: it answers
with the ``n_sentences`` retrieved sentences most similar to the question (cosine of sentence embeddings),
returned in article order. What it measures is how good the retrieved evidence is, which is what a retriever
comparison needs when no LLM is available.
"""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np


class Reader(Protocol):
    name: str

    def answer(self, questions: Sequence[str], sentence_lists: Sequence[Sequence[str]]) -> list[str]: ...


class ExtractiveReader:
    name = "extractive"

    def __init__(self, embedder, n_sentences: int = 2):
        if n_sentences < 1:
            raise ValueError(f"ExtractiveReader: n_sentences must be >= 1, got {n_sentences}")
        self.embedder = embedder
        self.n_sentences = n_sentences

    def answer(self, questions, sentence_lists):
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


class LLMReader:
    """The paper's setting: the retrieved sentences and the question go to an LLM, which answers."""

    name = "llm"

    def __init__(self, client, prompt_name: str = "answer"):
        from opi.llm.prompts import load_prompt

        self.client = client
        self.prompt = load_prompt(prompt_name)

    def messages(self, question: str, sentences: Sequence[str]) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.prompt.render(sentences=format_sentences(sentences),
                                                               question=question)}]

    def answer(self, questions, sentence_lists, progress=None):
        requests = [(self.messages(q, s), None) for q, s in zip(questions, sentence_lists)]
        return [a.strip() for a in self.client.complete_many(requests, progress)]
