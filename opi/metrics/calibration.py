"""LRCR calibrated by a few human labels (prediction-powered inference, ``opi.metrics.ppi``).

Per example of one configuration: ``machine`` = 1 where the classifier's relation of the generated answer equals
the gold one (what raw LRCR averages), ``human`` = 1 where the relation people named does (NaN where nobody
labelled it). The calibrated LRCR is the PPI++ mean of ``human`` stratified by gold relation (each relation with
at least ``MIN_PER_RELATION`` labels a stratum, the others one stratum together; each weighted by its share of the
examples): unbiased however wrong the classifier is, its interval valid (cut to [0, 1], where the share lies).
Questions on one article are correlated: with ``clusters`` (each example's article, ``opi.metrics.stats.
cluster_codes``) the interval uses PPI's cluster-robust variance, the strata's influence terms summed per article.

Per relation, a relation with at least ``MIN_PER_RELATION`` labels gets its own PPI++ estimate; the relations below
that share one correction, the mean of (machine - human) over their labels pooled (over all labels when they have
none), subtracted from their raw LRCR. Those per-relation values enter Formula 3 (``opi.metrics.opi.pooled_opi``)
with the per-relation BERTSim, which gives ``opi_1_calibrated`` (their mean clipped to [0, 1], not each one: a
relation corrected below 0 would otherwise lift it); its interval is a percentile bootstrap that draws
whole clusters with replacement (labelled and unlabelled examples together; where every cluster lies within one
relation and one of the two samples, as single examples do, within each relation's labelled and unlabelled
examples, so both samples vary), a relation absent from a resample left out of its Formula 3.

``labels_for_width`` plans labels for an interval's half-width, inflated by the design effect 1 + (m - 1)·ICC of
the residuals' intra-article correlation (``opi.metrics.ppi.labels_needed``).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd

from opi.metrics.opi import opi
from opi.metrics.ppi import labels_needed, ppi_mean, stratified_ppi_mean
from opi.metrics.stats import ClusterSums, cluster_weights

MIN_PER_RELATION = 10
DEFAULT_ICC = 0.3  # the residuals' intra-article correlation assumed until the labels can estimate it


def _relation_lrcr(machine: np.ndarray, human: np.ndarray, relations: np.ndarray, names: list[str],
                   clip: bool = True) -> np.ndarray:
    """Each relation's calibrated LRCR (see the module's docstring), clipped to [0, 1] unless not ``clip``."""
    labelled = ~np.isnan(human)
    small = [r for r in names if (labelled & (relations == r)).sum() < MIN_PER_RELATION]
    pool = labelled & np.isin(relations, small)
    pool = pool if pool.any() else labelled
    correction = float(np.mean(machine[pool] - human[pool])) if pool.any() else 0.0
    values = []
    for relation in names:
        mine = relations == relation
        if relation in small:
            values.append(float(np.mean(machine[mine])) - correction)
        else:
            values.append(ppi_mean(human[mine & labelled], machine[mine & labelled],
                                   machine[mine & ~labelled]).value)
    return np.clip(values, 0.0, 1.0) if clip else np.array(values)


def _formula3(machine, human, relations, similarity, names) -> float:
    names = [r for r in names if (relations == r).any()]  # a relation a resample left out
    bertsim = np.array([similarity[relations == r].mean() for r in names])
    # the mean clipped, not each relation: clipped one by one, the relations corrected below 0 would lift the mean
    lrcr = float(np.clip(_relation_lrcr(machine, human, relations, names, clip=False).mean(), 0.0, 1.0))
    return opi(max(float(bertsim.mean()), 0.0), lrcr)


def cluster_draws(clusters: np.ndarray, cells: np.ndarray, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Each bootstrap resample's example indices: whole clusters (``clusters``: each example's code 0..G-1) drawn
    with replacement, each example of a cluster drawn k times k times over (``opi.metrics.stats.cluster_weights``:
    within each of ``cells`` where every cluster lies in one)."""
    data = ClusterSums({}, cells, clusters)
    examples = np.arange(len(clusters))
    for batch in cluster_weights(data, resamples, seed):
        for weights in batch:
            yield np.repeat(examples, weights[clusters].astype(int))


def calibrated_lrcr(machine, human, relations, similarity, alpha: float = 0.05, resamples: int = 1000,
                    seed: int = 0, clusters=None) -> dict[str, float]:
    """Raw and calibrated LRCR and OPI-1 (Formula 3) of one configuration, with intervals and labels used;
    ``clusters``: each example's cluster (its article; None: every example its own)."""
    machine, human = np.asarray(machine, float), np.asarray(human, float)
    relations, similarity = np.asarray(relations, str), np.asarray(similarity, float)
    labelled = ~np.isnan(human)
    names = sorted(set(relations))
    # strata: relations with enough labels for their own variance, the rest as one (a stratum of three labels
    # underestimates its variance: 11 of 15 intervals covered on the README grid with 40 labels in 13 relations)
    codes = None if clusters is None else pd.factorize(np.asarray(clusters))[0]
    overall = stratified_ppi_mean(human[labelled], machine[labelled], relations[labelled], machine[~labelled],
                                  relations[~labelled], alpha, MIN_PER_RELATION,
                                  *((None, None) if codes is None else (codes[labelled], codes[~labelled])))
    result = {"lrcr_calibrated": overall.value, "lrcr_calibrated_ci_low": max(overall.low, 0.0),
              "lrcr_calibrated_ci_high": min(overall.high, 1.0), "labels_used": float(labelled.sum()),
              "opi_1_calibrated": _formula3(machine, human, relations, similarity, names)}
    cells = np.char.add(relations, np.where(labelled, "|labelled", "|unlabelled"))
    draws = [_formula3(machine[index], human[index], relations[index], similarity[index], names)
             for index in cluster_draws(np.arange(len(machine)) if codes is None else codes, cells, resamples, seed)]
    result["opi_1_calibrated_ci_low"], result["opi_1_calibrated_ci_high"] = (
        float(np.quantile(draws, alpha / 2)), float(np.quantile(draws, 1 - alpha / 2)))
    for relation, value, count in zip(names, _relation_lrcr(machine, human, relations, names),
                                      [(labelled & (relations == r)).sum() for r in names]):
        if count >= MIN_PER_RELATION:
            result[f"lrcr_calibrated.{relation}"] = float(value)
    return result


def labels_for_width(width: float, residual_variance: float | None, answers: int, alpha: float = 0.05,
                     icc: float = 0.0, same_cluster: float = 0.0) -> tuple[int, bool]:
    """(human labels for a calibrated LRCR interval of half-width ``width``, at most every answer; whether that
    many reach it): ``opi.metrics.ppi.labels_needed``, the design effect of ``icc`` and ``same_cluster`` included."""
    if not 0 < width < 1:
        raise ValueError(f"width must be in (0, 1), got {width}")
    needed = labels_needed(width, residual_variance, alpha, icc, same_cluster)
    return int(min(needed, answers)), bool(needed <= answers)
