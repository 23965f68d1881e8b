"""Clustered examples with a known truth, for the statistics' simulations (tests and ``benchmarks/``).

An article ``g`` of ``m_g`` questions: a question's value is ``mu + a_g + e_i`` with ``var(a) = icc`` and
``var(e) = 1 - icc``, so the intra-article correlation is ``icc``. Two configurations on the same questions share
the article effect of the question's difficulty; under the null their difference has mean 0 and an article effect of
its own (``icc`` of the difference's variance), which is what makes per-question tests too confident.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

RELATIONS = ("deductive", "fuzzy", "adversarial", "multi_hop")


def articles(rng: np.random.Generator, articles_range=(20, 60), questions_range=(4, 12)) -> np.ndarray:
    """Each question's article code: 20-60 articles of 4-12 questions each (both drawn)."""
    count = rng.integers(articles_range[0], articles_range[1] + 1)
    sizes = rng.integers(questions_range[0], questions_range[1] + 1, size=count)
    return np.repeat(np.arange(count), sizes)


def clustered_values(rng: np.random.Generator, article: np.ndarray, mu: float, icc: float) -> np.ndarray:
    effect = rng.normal(0.0, np.sqrt(icc), article.max() + 1)
    return mu + effect[article] + rng.normal(0.0, np.sqrt(1 - icc), len(article))


def rows(values: np.ndarray, article: np.ndarray, rng: np.random.Generator, column: str = "score") -> pd.DataFrame:
    """Prediction-like rows: id, cluster, a relation drawn per question (articles mix relations), the value."""
    return pd.DataFrame({"id": [f"q{i}" for i in range(len(values))], "cluster": [f"a{g}" for g in article],
                         "relation": rng.choice(RELATIONS, size=len(values)), column: values})


@dataclass(frozen=True)
class Simulation:
    repetitions: int
    coverage: dict[str, float]  # unit -> share of 95 % intervals holding the true mean
    false_positives: dict[str, float]  # unit -> share of null paired tests with p < alpha
    widths: dict[str, float]  # unit -> mean interval width


def simulate(repetitions: int, icc: float = 0.3, seed: int = 0, resamples: int = 1000, permutations: int = 999,
             alpha: float = 0.05) -> Simulation:
    """Coverage of the bootstrap intervals and false positive rate of the paired tests, by article and by
    question, on ``repetitions`` data sets drawn afresh."""
    from opi.metrics.stats import column_interval, compare_column

    rng = np.random.default_rng(seed)
    covered = {"article": 0, "example": 0}
    rejected = {"article": 0, "example": 0}
    width = {"article": 0.0, "example": 0.0}
    for repetition in range(repetitions):
        article = articles(rng)
        one = rows(clustered_values(rng, article, 0.5, icc), article, rng)
        difference = clustered_values(rng, article, 0.0, icc)  # the null: no difference on average
        other = one.assign(score=one["score"] - difference)
        for unit in covered:
            interval = column_interval(one, "score", 0.95, resamples, repetition, unit)
            covered[unit] += interval.low <= 0.5 <= interval.high
            width[unit] += interval.high - interval.low
            rejected[unit] += compare_column(one, other, "score", alpha, permutations, repetition, unit).significant
    return Simulation(repetitions, {u: c / repetitions for u, c in covered.items()},
                      {u: r / repetitions for u, r in rejected.items()},
                      {u: w / repetitions for u, w in width.items()})
