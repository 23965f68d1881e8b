"""Bounds for a retriever comparison: a seeded random retriever (knows nothing) and an oracle (returns the chunks
that hold the gold evidence). Every configuration can then be placed between "found nothing on purpose" and
"found all the evidence" (the report's share of the gap closed)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from opi.chunking import Chunk
from opi.diagnostics import content_words, normalized
from opi.retrievers.base import Ranking, Retriever


@dataclass
class RandomRetriever(Retriever):
    """Chunks drawn at random, the same for the same (random_seed, question, chunks) in every run."""

    bound: ClassVar[str] = "lower"
    embeds: ClassVar[bool] = False
    name: str = "Random"
    random_seed: int = 0  # a setting of its own: `seed` is the run's, which components receive as a resource

    def rank(self, questions, chunks, depth):
        rankings = []
        for question in questions:
            digest = hashlib.sha256(f"{self.random_seed}\0{question}\0{len(chunks)}".encode()).digest()
            rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
            rankings.append(Ranking.by_position(rng.permutation(len(chunks))[:depth]))
        return rankings


@dataclass
class OracleRetriever(Retriever):
    """The fewest chunks that hold an example's gold evidence, chosen greedily: the chunk holding the
    most evidence pieces first. A piece no chunk holds whole is credited to the chunk sharing most of its content
    words. Needs examples with evidence; an example without any gets no chunk."""

    bound: ClassVar[str] = "upper"
    embeds: ClassVar[bool] = False
    needs_evidence: ClassVar[bool] = True
    name: str = "Oracle"

    def rank(self, questions, chunks, depth):
        raise ValueError("the oracle retriever ranks examples (it needs their gold evidence): use rank_examples")

    def rank_examples(self, examples, chunks: list[Chunk], depth: int) -> list[Ranking]:
        texts = [normalized(c.text) for c in chunks]
        rankings = []
        for example in examples:
            holders = [self._holders(piece, texts, chunks) for piece in example.evidence]
            chosen: list[int] = []
            uncovered = set(range(len(holders)))
            while uncovered and len(chosen) < depth:  # greedy: the first k picks are the picks of k
                gains = {c: sum(c in holders[p] for p in uncovered) for c in range(len(chunks)) if c not in chosen}
                best = max(gains, key=lambda c: (gains[c], -c)) if gains else None
                if best is None or gains[best] == 0:
                    break
                chosen.append(best)
                uncovered -= {p for p in uncovered if best in holders[p]}
            rankings.append(Ranking.by_position(chosen))
        return rankings

    @staticmethod
    def _holders(piece: str, texts: list[str], chunks: list[Chunk]) -> set[int]:
        whole = {i for i, text in enumerate(texts) if normalized(piece) in text}
        if whole:
            return whole
        wanted = content_words(piece)
        overlap = [len(wanted & content_words(c.text)) for c in chunks]
        return {int(np.argmax(overlap))} if wanted and max(overlap) > 0 else set()
