"""Uncertainty for BERTSim, LRCR and OPI: bootstrap confidence intervals and paired significance tests.

With 10-100 examples per relation a few points of OPI are noise. Intervals resample examples *within each
relation* (the per-relation counts, and so Formula (3)'s weighting, stay those of the data); scipy's bootstrap
cannot stratify, so the resampling is ours. Two configurations on the same examples are compared with scipy's
paired permutation test (each example's pair of results swapped at random), which keeps the relation mix exact.
Any other per-example column (the retrieval metrics) gets the same: ``column_interval`` and ``compare_column``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from opi.metrics.opi import beta_key, opi

METRICS = ("bertsim", "lrcr", "opi")


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float


class Scorer:
    """Headline BERTSim, LRCR and pooled OPI(β) for many index draws at once, over one set of examples.

    A draw is an integer array of row numbers whose position ``i`` holds an example of relation ``positions[i]``
    (true of stratified resamples and of paired swaps); ``positions`` defaults to the rows' own relations."""

    def __init__(self, rows: pd.DataFrame, beta: float = 1.0, positions: np.ndarray | None = None):
        self.similarity = rows["similarity"].to_numpy(dtype=float)
        self.correct = (rows["relation"] == rows["predicted_relation"]).to_numpy(dtype=float)
        self.relations = strata(rows["relation"].to_numpy() if positions is None else np.asarray(positions))
        self.onehot = (self.relations[:, None] == np.unique(self.relations)[None, :]).astype(float)  # positions x strata
        self.counts = self.onehot.sum(axis=0)
        self.beta = beta

    def __call__(self, draws: np.ndarray, metric: str) -> np.ndarray:
        """``metric`` for each row of ``draws`` (shape [..., n])."""
        if metric == "bertsim":
            return self.similarity[draws].mean(axis=-1)
        if metric == "lrcr":
            return self.correct[draws].mean(axis=-1)
        b = np.maximum((self.similarity[draws] @ self.onehot / self.counts).mean(axis=-1), 0.0)
        l_ = (self.correct[draws] @ self.onehot / self.counts).mean(axis=-1)
        return np.asarray(opi(b, l_, self.beta))


def strata(relations: np.ndarray) -> np.ndarray:
    """Each position's stratum as an integer code, in order of first appearance; a missing relation (None or NaN)
    is one stratum of its own (NaN never equals itself, so comparing labels would leave such rows out)."""
    return pd.factorize(pd.Series(relations, dtype=object), use_na_sentinel=False)[0]


def stratified_draws(relations: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """``resamples`` x n indices: position i draws, with replacement, among the examples of i's relation."""
    rng = np.random.default_rng(seed)
    codes = strata(relations)
    draws = np.empty((resamples, len(relations)), dtype=int)
    for stratum in np.unique(codes):
        members = np.flatnonzero(codes == stratum)
        draws[:, members] = rng.choice(members, size=(resamples, len(members)), replace=True)
    return draws


def confidence_intervals(rows: pd.DataFrame, beta: float = 1.0, confidence: float = 0.95, resamples: int = 2000,
                         seed: int = 0, metrics: Sequence[str] = METRICS) -> dict[str, Interval]:
    """Percentile intervals from a relation-stratified bootstrap, for ``metrics`` (bertsim, lrcr and opi_<β>;
    rows without gold relations are one stratum and have only bertsim)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    scorer = Scorer(rows, beta)
    draws = stratified_draws(scorer.relations, resamples, seed)
    identity = np.arange(len(rows))
    tail = (1 - confidence) / 2 * 100
    result = {}
    for metric in metrics:
        values = scorer(draws, metric)
        low, high = np.percentile(values, [tail, 100 - tail])
        name = beta_key(beta) if metric == "opi" else metric
        result[name] = Interval(float(scorer(identity, metric)), float(low), float(high))
    return result


@dataclass(frozen=True)
class Comparison:
    metric: str
    difference: float  # first minus second
    p_value: float
    significant: bool

    @property
    def verdict(self) -> str:
        if not self.significant:
            return "not distinguishable"
        return "higher" if self.difference > 0 else "lower"


def compare(first: pd.DataFrame, second: pd.DataFrame, metric: str = "opi", beta: float = 1.0,
            alpha: float = 0.05, resamples: int = 9999, seed: int = 0) -> Comparison:
    """Paired permutation test of ``metric`` between two configurations' results on the same examples."""
    from scipy.stats import permutation_test

    if list(first["id"]) != list(second["id"]):
        first, second = aligned(first, second)
    n = len(first)
    scorer = Scorer(pd.concat([first, second], ignore_index=True), beta, first["relation"].to_numpy())
    if n < 2:  # one pair cannot show anything
        return Comparison(metric, float(scorer(np.arange(1), metric) - scorer(np.arange(1) + 1, metric)) if n else 0.0,
                          1.0, False)

    def statistic(x, y, axis=-1):
        return scorer(x, metric) - scorer(y, metric)

    result = permutation_test((np.arange(n), np.arange(n) + n), statistic, permutation_type="samples",
                              vectorized=True, n_resamples=resamples, random_state=seed,
                              batch=max(1, 2_000_000 // n))  # bounded memory on large sets
    return Comparison(metric, float(result.statistic), float(result.pvalue), bool(result.pvalue < alpha))


def aligned(first: pd.DataFrame, *others: pd.DataFrame) -> list[pd.DataFrame]:
    """Configurations' rows in the first's order; configurations of different examples cannot be paired."""
    if any(set(other["id"]) != set(first["id"]) or len(other) != len(first) for other in others):
        raise ValueError("a paired comparison needs the configurations scored on the same examples")
    order = first["id"].tolist()
    return [first, *(other.set_index("id").loc[order].reset_index() for other in others)]


def gap_closed(rows: pd.DataFrame, lower: pd.DataFrame, upper: pd.DataFrame, metric: str = "opi", beta: float = 1.0,
               confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> Interval:
    """Share of the gap between a lower and an upper bound (the random and oracle retrievers) that a configuration
    closes, ``(M - M_lower) / (M_upper - M_lower)``, with a percentile interval from a relation-stratified bootstrap
    that draws the same examples for all three. NaN where the bounds do not differ."""
    if not list(lower["id"]) == list(rows["id"]) == list(upper["id"]):
        rows, lower, upper = aligned(rows, lower, upper)
    n = len(rows)
    scorer = Scorer(pd.concat([rows, lower, upper], ignore_index=True), beta, rows["relation"].to_numpy())

    def share(draws: np.ndarray) -> np.ndarray:
        value, low, high = scorer(draws, metric), scorer(draws + n, metric), scorer(draws + 2 * n, metric)
        gap = high - low
        return np.where(gap > 0, (value - low) / np.where(gap > 0, gap, 1.0), np.nan)

    draws = stratified_draws(scorer.relations, resamples, seed)
    tail = (1 - confidence) / 2 * 100
    shares = share(draws)
    point = float(share(np.arange(n)[None, :])[0])
    if np.isnan(shares).all():
        return Interval(point, float("nan"), float("nan"))
    low, high = np.nanpercentile(shares, [tail, 100 - tail])
    return Interval(point, float(low), float(high))


def column_values(rows: pd.DataFrame, column: str) -> np.ndarray:
    """A per-example column as floats, a missing value (None, <NA>) as NaN."""
    return pd.to_numeric(rows[column]).to_numpy(dtype=float, na_value=np.nan)


def column_mean(values: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Mean of a per-example column for each row of ``draws`` (index arrays of shape [..., n])."""
    return values[draws].mean(axis=-1)


def column_interval(rows: pd.DataFrame, column: str, confidence: float = 0.95, resamples: int = 2000,
                    seed: int = 0) -> Interval | None:
    """Mean of a per-example column over the examples that have a value, with a percentile interval from a
    relation-stratified bootstrap (as BERTSim's); None when no example has one."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    values = column_values(rows, column)
    present = ~np.isnan(values)
    if not present.any():
        return None
    values = values[present]
    draws = stratified_draws(rows["relation"].to_numpy()[present], resamples, seed)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(column_mean(values, draws), [tail, 100 - tail])
    return Interval(float(values.mean()), float(low), float(high))


def compare_column(first: pd.DataFrame, second: pd.DataFrame, column: str, alpha: float = 0.05,
                   resamples: int = 9999, seed: int = 0) -> Comparison:
    """Paired permutation test of a per-example column's mean between two configurations on the same examples;
    examples missing a value in either are left out."""
    from scipy.stats import permutation_test

    if list(first["id"]) != list(second["id"]):
        first, second = aligned(first, second)
    x, y = column_values(first, column), column_values(second, column)
    both = ~(np.isnan(x) | np.isnan(y))
    values = np.concatenate([x[both], y[both]])
    n = int(both.sum())
    if n < 2:  # one pair cannot show anything
        return Comparison(column, float(values[0] - values[1]) if n else 0.0, 1.0, False)

    def statistic(a, b, axis=-1):
        return column_mean(values, a) - column_mean(values, b)

    result = permutation_test((np.arange(n), np.arange(n) + n), statistic, permutation_type="samples",
                              vectorized=True, n_resamples=resamples, random_state=seed,
                              batch=max(1, 2_000_000 // n))
    return Comparison(column, float(result.statistic), float(result.pvalue), bool(result.pvalue < alpha))
