"""Combinations of retrievers: which chunks and complete sentences a configuration hands the reader.

The rules are pure functions over rankings and sentence ids:
- A- (algorithmic): weighted reciprocal-rank fusion, the rule and arithmetic of LangChain's ``EnsembleRetriever``:
  score(chunk) = sum over members of weight / (rank + c), rank from 1, c = 60, weights 1/n by default; ties keep the
  order in which chunks first appear across the members. LangChain returns every fused chunk; the paper's
  combinations return the default 4, so the fused list is cut to ``k`` (``None`` = no cut).
- S- (sentence): the union of the complete sentences each member retrieved with its own top-k, de-duplicated,
  in article order.
The combination classes (``conf/combination/*.yaml`` name them with ``_target_``) carry the settings and the
members (names in the ``retrievers`` catalogue), and apply a rule to one example's member rankings.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, ClassVar, Iterable, Optional, Sequence

from opi.retrievers.base import Ranking
from opi.checks import require_number, require_numbers

SentencesOf = Callable[[Sequence[int]], list[int]]  # chunk ids -> the complete sentences they cover


@dataclass(frozen=True)
class Retrieved:
    """What one configuration retrieved for one example."""
    chunk_ids: tuple[int, ...]
    sentence_ids: tuple[int, ...]


def reciprocal_rank_fusion(rankings: Sequence[Ranking], weights: Sequence[float] | None = None, c: float = 60,
                           k: int | None = 4) -> Ranking:
    """Fuse member rankings as LangChain's ``EnsembleRetriever.weighted_reciprocal_rank`` does (the same
    floating-point sums, so exact ties break the same way: by first appearance across members)."""
    if not rankings:
        raise ValueError("reciprocal_rank_fusion needs at least one ranking")
    weights = list(weights) if weights is not None else [1 / len(rankings)] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[int, float] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, chunk_id in enumerate(ranking.chunk_ids, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + weight / (rank + c)
    fused = sorted(scores.items(), key=lambda item: -item[1])  # sorted() is stable: first appearance breaks ties
    return Ranking(tuple(i for i, _ in fused), tuple(s for _, s in fused)).top(k)


def sentence_union(sentence_id_groups: Iterable[Iterable[int]]) -> list[int]:
    """Union of the members' sentence ids, duplicates removed, in article order."""
    return sorted({i for group in sentence_id_groups for i in group})


class Combination:
    """What the run asks of a combination: its ``kind`` (``single``, ``A-``, ``S-``), ``name`` and ``members``
    (names in the ``retrievers`` catalogue); ``k``, the chunks it hands on (None: each member's own ``k`` decides);
    ``ordered``, whether it has an order of its own;
    ``combine``, one example's retrieved chunks and sentences from its members' rankings cut to their k; and
    ``ranking``, the order rank-aware metrics read (None: it has none, the members' rankings are read)."""

    kind: ClassVar[str]
    k: ClassVar[Optional[int]] = None
    ordered: ClassVar[bool] = False  # one order of its own (single, A-): a reranker reads it as one list
    name: str
    members: list[str]

    def combine(self, rankings: Sequence[Ranking], sentences_of: SentencesOf) -> Retrieved:
        raise NotImplementedError(f"{type(self).__name__} must implement combine(rankings, sentences_of)")

    def ranking(self, deep: Sequence[Ranking], cut: Sequence[Ranking]) -> Ranking | None:
        raise NotImplementedError(f"{type(self).__name__} must implement ranking(deep, cut)")


@dataclass
class Single(Combination):
    """One retriever alone (the ``retriever`` group's choice)."""

    kind: ClassVar[str] = "single"
    ordered: ClassVar[bool] = True
    name: str = "single"
    members: list[str] = field(default_factory=list)

    def combine(self, rankings: Sequence[Ranking], sentences_of: SentencesOf) -> Retrieved:
        (ranking,) = rankings
        return Retrieved(ranking.chunk_ids, tuple(sentences_of(ranking.chunk_ids)))

    def ranking(self, deep: Sequence[Ranking], cut: Sequence[Ranking]) -> Ranking | None:
        """The configuration's ranking beyond ``k`` (what rank-aware metrics read): the retriever's, uncut."""
        (ranking,) = deep
        return ranking


def _check_members(name: str, members: Sequence[str], weights: Sequence[float] | None = None) -> None:
    if len(members) < 2:
        raise ValueError(f"combination {name} needs at least two members, got {list(members)}")
    if len(set(members)) != len(members):
        raise ValueError(f"combination {name} lists a member twice: {list(members)}")
    if weights is not None and len(weights) != len(members):
        raise ValueError(f"combination {name}: {len(weights)} weights for {len(members)} members")


@dataclass
class RankFusion(Combination):
    """A-: reciprocal-rank fusion of the members' rankings, cut to ``k`` chunks."""

    kind: ClassVar[str] = "A-"
    ordered: ClassVar[bool] = True
    name: str = "A-"
    members: list[str] = field(default_factory=list)
    weights: Optional[list[float]] = None  # one per member; None = equal (1/n each, LangChain's default)
    c: float = 60.0
    k: Optional[int] = 4  # None = keep every fused chunk (LangChain's EnsembleRetriever)

    def __post_init__(self):
        _check_members(self.name, self.members, self.weights)
        if self.k is not None and self.k < 1:
            raise ValueError(f"k must be >= 1 or null, got {self.k}")
        require_number("c", self.c, gt=0)
        require_numbers("weights", self.weights, ge=0)

    def combine(self, rankings: Sequence[Ranking], sentences_of: SentencesOf) -> Retrieved:
        fused = reciprocal_rank_fusion(rankings, self.weights, self.c, self.k)
        return Retrieved(fused.chunk_ids, tuple(sentences_of(fused.chunk_ids)))

    def ranking(self, deep: Sequence[Ranking], cut: Sequence[Ranking]) -> Ranking | None:
        """Every chunk the members' top k hold, in fused order (its first ``k`` are what ``combine`` hands on)."""
        return reciprocal_rank_fusion(cut, self.weights, self.c, None)


@dataclass
class SentenceUnion(Combination):
    """S-: the union of the complete sentences each member retrieved."""

    kind: ClassVar[str] = "S-"
    name: str = "S-"
    members: list[str] = field(default_factory=list)

    def __post_init__(self):
        _check_members(self.name, self.members)

    def ranking(self, deep: Sequence[Ranking], cut: Sequence[Ranking]) -> Ranking | None:
        """None: a union of sentences has no rank order (rank-aware metrics read the members' rankings)."""
        return None

    def combine(self, rankings: Sequence[Ranking], sentences_of: SentencesOf) -> Retrieved:
        chunk_ids = tuple(dict.fromkeys(i for r in rankings for i in r.chunk_ids))
        return Retrieved(chunk_ids, tuple(sentence_union(sentences_of(r.chunk_ids) for r in rankings)))
