"""Meta-evaluation: does a metric agree with people? Any two score columns, per example and per configuration.

- rank agreement across configurations: Spearman and Kendall (scipy.stats) on the per-configuration means;
- per-example Pearson correlation;
- average absolute difference after mapping both to [0, 1] (0-3-7 scores divide by 7);
- score-bracket accuracy: the share of examples whose two scores fall in the same band (edges configurable);
- the paper's "rankings agree on places k" view.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd


def to_unit(values: Sequence[float], scale_max: float) -> np.ndarray:
    if scale_max <= 0:
        raise ValueError(f"scale_max must be > 0, got {scale_max}")
    return np.asarray(values, dtype=float) / scale_max


def average_absolute_difference(a: Sequence[float], b: Sequence[float]) -> float:
    return float(np.mean(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))))


def bracket_accuracy(a: Sequence[float], b: Sequence[float], edges: Sequence[float] = (1 / 3, 2 / 3)) -> float:
    """Share of examples whose scores (on [0, 1]) land in the same bracket; brackets split at ``edges``."""
    return float(np.mean(np.digitize(a, edges) == np.digitize(b, edges)))


def rank_agreement(a: pd.Series, b: pd.Series) -> dict[str, float]:
    """Spearman and Kendall correlation of two per-configuration score series (indexed by configuration)."""
    from scipy.stats import kendalltau, spearmanr

    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner")
    if len(joined) < 2:
        raise ValueError("rank agreement needs at least two configurations scored by both")
    return {"spearman": float(spearmanr(joined["a"], joined["b"]).statistic),
            "kendall": float(kendalltau(joined["a"], joined["b"]).statistic)}


def pearson(a: Sequence[float], b: Sequence[float]) -> float:
    from scipy.stats import pearsonr

    return float(pearsonr(a, b).statistic)


def places(a: pd.Series, b: pd.Series) -> pd.DataFrame:
    """Place by place (1 = best): the configuration each metric ranks there, and whether they agree."""
    first = a.sort_values(ascending=False, kind="stable").index.tolist()
    second = b.sort_values(ascending=False, kind="stable").index.tolist()
    return pd.DataFrame({"place": range(1, len(first) + 1), "by_" + str(a.name): first, "by_" + str(b.name): second,
                         "agree": [x == y for x, y in zip(first, second)]})


def agreement_table(scores: pd.DataFrame, reference: str, scales: dict[str, float],
                    edges: Sequence[float] = (1 / 3, 2 / 3)) -> pd.DataFrame:
    """How well each score column agrees with ``reference``, one row per column.

    ``scores`` has one row per (example, configuration) with a ``configuration`` column; ``scales`` gives each
    column's maximum (7 for 0-3-7 scores, 1 for BERTSim), used to put both on [0, 1]. Rows where either score is
    missing (an unparsable judge reply) are left out of that comparison, and counted."""
    rows = []
    for column, scale_max in scales.items():
        if column == reference or column not in scores:
            continue
        pair = scores[["configuration", reference, column]].dropna()
        a, b = to_unit(pair[reference], scales[reference]), to_unit(pair[column], scale_max)
        means = pair.assign(a=a, b=b).groupby("configuration")[["a", "b"]].mean()
        ranks = rank_agreement(means["a"], means["b"]) if len(means) >= 2 else {"spearman": np.nan, "kendall": np.nan}
        rows.append({"metric": column, "reference": reference, **ranks,
                     "pearson": pearson(a, b) if len(pair) >= 2 else np.nan,
                     "average_absolute_difference": average_absolute_difference(a, b),
                     "bracket_accuracy": bracket_accuracy(a, b, edges),
                     "examples": len(pair), "configurations": len(means)})
    return pd.DataFrame(rows)
