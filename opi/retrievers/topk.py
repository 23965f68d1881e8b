"""Exact top-k over scores computed block by block, and chunk texts indexed once.

A retriever over a corpus of N chunks for Q questions never holds the Q x N score matrix: it scores one block of
chunks (or of questions) at a time and keeps each question's running top ``depth``. The result is the ranking a
full stable sort gives -- highest score first, a tie to the earlier chunk -- whatever the block size: within a
block ``argpartition`` finds the ``depth``-th score, every row where it splits a tie is settled by position, and
blocks are merged by (score, position).

Chunk texts that repeat (a paragraph shared by articles, boilerplate) are scored once: retrievers index
``DistinctTexts.texts`` and ``DistinctTexts.rankings`` maps the distinct texts' top ``depth`` back to chunks. That is
exact: a chunk among a question's first ``depth`` belongs to one of the first ``depth`` distinct texts when texts
are ordered by (score, first appearance).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from opi.interrupt import exiting
from opi.retrievers.base import Ranking

BLOCK_BYTES = 64 << 20  # one block of scores: questions x chunks x itemsize


class RankingInterrupted(RuntimeError):
    """The process is exiting (SIGTERM, Ctrl-C): rankings still to compute were left."""


def block_length(rows: int, itemsize: int = 8, budget: int | None = None) -> int:
    """How many columns a block of ``rows`` rows may have within ``budget`` bytes (default ``BLOCK_BYTES``), at
    least 64."""
    return max(64, (BLOCK_BYTES if budget is None else budget) // max(1, rows * itemsize))


def stop_if_exiting() -> None:
    if exiting():
        raise RankingInterrupted("stopped: the process is exiting")


def select(scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``depth`` best columns, best first, a tie to the earlier column: (columns, scores)."""
    scores = np.asarray(scores)
    depth = min(depth, scores.shape[1])
    if depth == 0:
        return np.zeros((len(scores), 0), dtype=np.int64), scores[:, :0]
    if depth < scores.shape[1]:
        picked = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
        values = np.take_along_axis(scores, picked, 1)
        kth = values.min(axis=1, keepdims=True)
        # where the depth-th score is shared by more columns than were picked, argpartition chose among them
        # arbitrarily: take the earliest
        split = np.flatnonzero((scores == kth).sum(1) > (values == kth).sum(1))
        for row in split:
            above = np.flatnonzero(scores[row] > kth[row])
            tied = np.flatnonzero(scores[row] == kth[row])[:depth - len(above)]
            picked[row] = np.concatenate([above, tied])
    else:
        picked = np.broadcast_to(np.arange(depth), scores.shape).copy()
    values = np.take_along_axis(scores, picked, 1)
    order = np.lexsort((picked, -values), axis=1)
    return np.take_along_axis(picked, order, 1), np.take_along_axis(values, order, 1)


def merge(first: tuple[np.ndarray, np.ndarray], second: tuple[np.ndarray, np.ndarray], depth: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """Two row-wise top lists (columns, scores) as one, best first, a tie to the earlier column."""
    columns = np.concatenate([first[0], second[0]], axis=1)
    values = np.concatenate([first[1], second[1]], axis=1)
    order = np.lexsort((columns, -values), axis=1)[:, :depth]
    return np.take_along_axis(columns, order, 1), np.take_along_axis(values, order, 1)


def top_k(scores_of: Callable[[int, int], np.ndarray], rows: int, columns: int, depth: int, block: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """Each row's top ``depth`` columns over ``scores_of(start, stop)``, the rows x (stop - start) scores of columns
    ``start:stop``, asked ``block`` columns at a time."""
    best = (np.zeros((rows, 0), dtype=np.int64), np.zeros((rows, 0)))
    for start in range(0, columns, block):
        stop_if_exiting()
        columns_, values = select(scores_of(start, min(columns, start + block)), depth)
        best = merge(best, (columns_ + start, values), depth) if start else (columns_ + start, values)
    return best


@dataclass(frozen=True)
class DistinctTexts:
    """Each distinct text of a list of chunks once, in order of first appearance."""

    texts: list[str]
    inverse: np.ndarray  # chunk position -> position of its text in ``texts``
    counts: np.ndarray  # how many chunks have each text

    @classmethod
    def of(cls, texts: Sequence[str]) -> "DistinctTexts":
        position: dict[str, int] = {}
        inverse = np.fromiter((position.setdefault(t, len(position)) for t in texts), dtype=np.int64,
                              count=len(texts))
        return cls(list(position), inverse, np.bincount(inverse, minlength=len(position)))

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def repeats(self) -> bool:
        return len(self.texts) < len(self.inverse)

    def chunks(self, rows: np.ndarray, values: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """One question's top ``depth`` chunks from its top distinct texts (``rows`` positions in ``texts``)."""
        if not self.repeats:
            return rows, values
        members = self._members()
        ids = np.concatenate([members[r][:depth] for r in rows]) if len(rows) else rows
        scores = np.repeat(values, [min(depth, len(members[r])) for r in rows])
        order = np.lexsort((ids, -scores))[:depth]
        return ids[order], scores[order]

    def rankings(self, rows: np.ndarray, values: np.ndarray, depth: int) -> list[Ranking]:
        """Every question's ranking of chunks from the top distinct texts of ``top_k`` / ``select``."""
        out = []
        for row, value in zip(rows, values):
            found = row >= 0  # an approximate index pads with -1 where it found fewer
            ids, scores = self.chunks(row[found], value[found], depth)
            out.append(Ranking(tuple(int(i) for i in ids), tuple(float(s) for s in scores)))
        return out

    def _members(self) -> list[np.ndarray]:
        cached = self.__dict__.get("_members_cache")
        if cached is None:
            order = np.argsort(self.inverse, kind="stable")
            cached = np.split(order, np.cumsum(self.counts)[:-1])
            object.__setattr__(self, "_members_cache", cached)
        return cached
