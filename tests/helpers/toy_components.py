"""Small components for the tests of ``opi.components`` (built by ``_target_``, so they live in an importable
module that is not a test module)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

from opi.llm.reader import Reader


@dataclass
class Toy:
    """Settings with and without defaults, a default factory, a resource, a field outside ``__init__`` and a class
    variable; ``__post_init__`` checks a range as components do."""

    kind: ClassVar[str] = "toy"
    size: int  # no default: the config must give it
    name: str = "toy"
    tags: list[str] = field(default_factory=lambda: ["a"])
    weight: Optional[float] = None
    embedder: Any = field(default=None, repr=False)  # a resource
    built: bool = field(default=False, init=False)

    def __post_init__(self):
        if self.size < 1:
            raise ValueError(f"size must be >= 1, got {self.size}")


class Open:
    """Not a dataclass; takes any keyword (``**options``), so it accepts every resource."""

    def __init__(self, size: int = 1, **options):
        self.size, self.options = size, options


@dataclass
class QuestionEchoReader(Reader):
    """Answers every question with the question itself, whatever was retrieved: answers that do not depend on the
    retriever, so BERTSim differs between two runs only if the yardstick does."""

    def answer(self, questions, sentence_lists, progress=None):
        return list(questions)


from opi.rerankers import Reranker  # noqa: E402  (appended: the toy rerankers below)


@dataclass
class ReversingReranker(Reranker):
    """Scores each candidate by its position, so the retriever's order comes out reversed."""

    name: str = "reverse"

    def scores(self, question: str, texts: list[str]) -> list[float]:
        return [float(position) for position in range(len(texts))]
