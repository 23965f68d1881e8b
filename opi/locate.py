"""Where a piece of text (a vector store's document) sits in the articles: found exactly, else with whitespace and
case ignored; as character offsets in the article's own text.

A team's collection usually holds far more documents than the data's articles: a document whose inner words (its
second to sixth, whole words whatever the splitter cut) are in no article is known not to be there without
searching the articles' text (``Locator.could_hold``), so each costs a hash lookup, not a search."""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

_SPACE = re.compile(r"\s+")
GRAM = 5  # words of the inner run a document must share with an article


def _lower(character: str) -> str:
    """A character lower-cased when that keeps it one character ('İ' lower-cases to two: kept as it is)."""
    lowered = character.lower()
    return lowered if len(lowered) == 1 else character


def fold(text: str) -> str:
    """``text`` with each whitespace run one space and each character lower-cased as ``folded`` does."""
    return "".join(_lower(c) for c in _SPACE.sub(" ", text))


@dataclass(frozen=True)
class Place:
    article: int  # its position in the articles searched
    start: int
    end: int  # exclusive


def folded(text: str) -> tuple[str, list[int]]:
    """``text`` lower-cased with each whitespace run one space, and, for each of its characters, the offset in
    ``text`` it came from (one past the end appended)."""
    out: list[str] = []
    offsets: list[int] = []
    at = 0
    for match in _SPACE.finditer(text):
        for i in range(at, match.start()):
            out.append(_lower(text[i]))
            offsets.append(i)
        out.append(" ")
        offsets.append(match.start())
        at = match.end()
    for i in range(at, len(text)):
        out.append(_lower(text[i]))
        offsets.append(i)
    offsets.append(len(text))
    return "".join(out), offsets


class Locator:
    """Finds texts in ``articles``: each text's first exact occurrence (articles in order), else its first
    occurrence with whitespace runs and case folded."""

    SEPARATOR = "\x00"

    def __init__(self, articles: Sequence[str]):
        self.articles = list(articles)
        self.starts: list[int] = []
        at = 0
        for article in self.articles:
            self.starts.append(at)
            at += len(article) + 1
        self.joined = self.SEPARATOR.join(self.articles)
        self._folded: tuple[str, list[int], list[int]] | None = None
        self._grams: np.ndarray | None = None

    def _fold(self) -> tuple[str, list[int], list[int]]:
        if self._folded is None:
            parts, offsets, starts, at = [], [], [], 0
            for article in self.articles:
                text, where = folded(article)
                starts.append(at)
                parts.append(text)
                offsets.append(where)
                at += len(text) + 1
            self._folded = (self.SEPARATOR.join(parts), starts, offsets)  # type: ignore[assignment]
        return self._folded  # type: ignore[return-value]

    def could_hold(self, text: str) -> bool:
        """False when ``text`` is surely in no article: its inner ``GRAM`` words (after its first, which a splitter
        may have cut mid-word, and before its last) are in none, case and whitespace folded."""
        words = fold(text.strip()).split(" ")
        if len(words) < GRAM + 2:
            return True
        if self._grams is None:
            tokens = self._fold()[0].split(" ")
            self._grams = np.unique(np.fromiter((hash(" ".join(tokens[i:i + GRAM]))
                                                 for i in range(max(len(tokens) - GRAM + 1, 0))), dtype=np.int64))
        wanted = hash(" ".join(words[1:1 + GRAM]))
        at = int(np.searchsorted(self._grams, wanted))
        return at < len(self._grams) and int(self._grams[at]) == wanted

    def find(self, text: str) -> Place | None:
        needle = text.strip()
        if not needle or self.SEPARATOR in needle or not self.could_hold(needle):
            return None
        at = self.joined.find(needle)
        if at >= 0:
            article = bisect.bisect_right(self.starts, at) - 1
            start = at - self.starts[article]
            return Place(article, start, start + len(needle))
        joined, starts, offsets = self._fold()
        folded_needle = fold(needle)
        at = joined.find(folded_needle)
        if at < 0:
            return None
        article = bisect.bisect_right(starts, at) - 1
        first = at - starts[article]
        where = offsets[article]
        return Place(article, where[first], where[first + len(folded_needle) - 1] + 1)
