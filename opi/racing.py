"""The data side of a race (``opi.race`` is its test): the examples dealt into rounds of whole clusters, and a
configuration's score on each cluster of a round.

Rounds: each cluster (an article, or ``dataset.group``'s value: the report's unit) is filed under the relation most
of its examples have; the clusters are shuffled (seeded), ordered by that relation, and dealt to the rounds in turn,
so every round holds about the same share of each relation, and the clusters of a round, in dealing order, are a
stratified random order of the data's clusters. The same for every configuration, whatever it is.

Scores are in [0, 1] per cluster: a column's mean over the cluster's examples (``bertsim``: the similarity,
clipped at 0; ``lrcr``: the share of relations named right; any other per-example column in [0, 1] such as
``ndcg_at_4``), or ``opi_<β>`` of the cluster's BERTSim and LRCR. A race therefore compares configurations by their
average over clusters, each cluster counting once; the full grid's tables weight examples (the same when clusters
are of one size, except for ``opi_<β>``: the mean of clusters' OPI is not the OPI of the pooled BERTSim and LRCR).
"""
from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Sequence

import numpy as np
import pandas as pd

from opi.data import Example
from opi.metrics.opi import opi

RELATION_METRICS = ("lrcr", "opi_")  # need gold and predicted relations


def rounds_of(examples: Sequence[Example], rounds: int, seed: int) -> list[list[str]]:
    """The clusters of each round, in dealing order."""
    relations: dict[str, Counter] = defaultdict(Counter)
    for example in examples:
        relations[example.cluster][example.relation or ""] += 1
    clusters = sorted(relations)
    random.Random(seed).shuffle(clusters)
    stratum = {c: min(relations[c].items(), key=lambda item: (-item[1], item[0]))[0] for c in clusters}
    dealt = sorted(clusters, key=lambda c: stratum[c])  # stable: the shuffled order within each relation
    return [dealt[r::rounds] for r in range(rounds)]


def in_rounds(examples: Sequence[Example], rounds: int, first: int, last: int, seed: int) -> list[Example]:
    """The examples of rounds ``first`` to ``last`` (1-based, inclusive), in the data's order."""
    kept = {c for clusters in rounds_of(examples, rounds, seed)[first - 1:last] for c in clusters}
    return [e for e in examples if e.cluster in kept]


def beta_of(metric: str) -> float:
    """The β of an OPI metric's name (``opi_0_5`` -> 0.5; ``opi.metrics.opi.beta_key``)."""
    return float(metric.removeprefix("opi_").replace("_", "."))


def cluster_scores(rows: pd.DataFrame, metric: str) -> dict[str, float]:
    """Cluster -> the configuration's score on it, from its prediction rows."""
    frame = pd.DataFrame({"cluster": rows["cluster"]})
    if metric in ("bertsim", "lrcr") or metric.startswith("opi_"):
        frame["b"] = pd.to_numeric(rows["similarity"], errors="coerce").clip(lower=0.0).fillna(0.0)
        frame["l"] = (rows["predicted_relation"] == rows["relation"]).astype(float)
        means = frame.groupby("cluster", sort=False)[["b", "l"]].mean()
        if metric == "bertsim":
            return means["b"].to_dict()
        if metric == "lrcr":
            return means["l"].to_dict()
        return dict(zip(means.index, np.atleast_1d(opi(means["b"].to_numpy(), means["l"].to_numpy(),
                                                       beta_of(metric))).tolist()))
    if metric not in rows:
        raise ValueError(f"the race metric {metric} is not in this configuration's results (its predictions have "
                         f"{', '.join(c for c in rows.columns if rows[c].dtype.kind == 'f')})")
    frame["v"] = pd.to_numeric(rows[metric], errors="coerce")
    return frame.groupby("cluster", sort=False)["v"].mean().fillna(0.0).clip(0.0, 1.0).to_dict()
