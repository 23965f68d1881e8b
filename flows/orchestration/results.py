"""What the stage tasks return (``flows.orchestration.tasks``), as kept in the stage cache. ``usage`` is an LLM
client's usage as metrics (calls, cache hits, tokens, cost; empty when no LLM was asked); ``counts`` are the
stage's own counts (replies that could not be parsed, pairs scored). ``Scores``: a configuration's whole result, as
kept (``flows.orchestration.kept``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reranked:
    """Each example's candidates in the reranker's order (``rankings``, by example id)."""

    rankings: dict[str, Any]
    counts: dict[str, float]
    usage: dict[str, float]


@dataclass(frozen=True)
class Answers:
    """One answer per question (None: the LLM gave no answer); ``calls``, an LLM reader's per-example prompt,
    cache hit and tokens (for the traces)."""

    answers: list[str | None]
    usage: dict[str, float] = field(default_factory=dict)
    calls: list | None = None


@dataclass(frozen=True)
class Classified:
    """One relation per triple (``unknown`` where an LLM reply could not be parsed); ``replies``, an LLM
    classifier's raw replies (for the traces)."""

    predicted: list[str]
    usage: dict[str, float] = field(default_factory=dict)
    counts: dict[str, float] = field(default_factory=dict)
    replies: list[str] | None = None


@dataclass(frozen=True)
class Quality:
    """LLM-scored answer metrics: per-example ``columns`` (None where a reply could not be parsed) and ``texts``
    beside them (the judge's reasons)."""

    columns: dict[str, list] = field(default_factory=dict)
    texts: dict[str, list] = field(default_factory=dict)
    counts: dict[str, float] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Scores:
    """A configuration's result: its metrics, per-example predictions, per-relation table, traces, and how many
    stage results it took."""

    metrics: dict[str, float]
    predictions: Any
    per_relation: Any
    traces: list
    stages: int
