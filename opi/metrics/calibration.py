"""LRCR calibrated by a few human labels (prediction-powered inference, ``opi.metrics.ppi``).

Per example of one configuration: ``machine`` = 1 where the classifier's relation of the generated answer equals
the gold one (what raw LRCR averages), ``human`` = 1 where the relation people named does (NaN where nobody
labelled it). The calibrated LRCR is the PPI++ mean of ``human`` stratified by gold relation (each relation with
at least ``MIN_PER_RELATION`` labels a stratum, the others one stratum together; each weighted by its share of the
examples): unbiased however wrong the classifier is, its interval valid (cut to
[0, 1], where the share lies).

Per relation, a relation with at least ``MIN_PER_RELATION`` labels gets its own PPI++ estimate; the relations below
that share one correction, the mean of (machine - human) over their labels pooled (over all labels when they have
none), subtracted from their raw LRCR. Those per-relation values enter Formula 3 (``opi.metrics.opi.pooled_opi``)
with the per-relation BERTSim, which gives ``opi_1_calibrated``; its interval is a percentile bootstrap that
resamples the labelled and the unlabelled examples of each relation separately (both samples vary).
"""
from __future__ import annotations

import math

import numpy as np

from opi.metrics.opi import opi
from opi.metrics.ppi import labels_needed, ppi_mean, stratified_ppi_mean

MIN_PER_RELATION = 10


def _relation_lrcr(machine: np.ndarray, human: np.ndarray, relations: np.ndarray, names: list[str]) -> np.ndarray:
    """Each relation's calibrated LRCR (see the module's docstring), clipped to [0, 1]."""
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
    return np.clip(values, 0.0, 1.0)


def _formula3(machine, human, relations, similarity, names) -> float:
    bertsim = np.array([similarity[relations == r].mean() for r in names])
    return opi(max(float(bertsim.mean()), 0.0), float(_relation_lrcr(machine, human, relations, names).mean()))


def calibrated_lrcr(machine, human, relations, similarity, alpha: float = 0.05, resamples: int = 1000,
                    seed: int = 0) -> dict[str, float]:
    """Raw and calibrated LRCR and OPI-1 (Formula 3) of one configuration, with intervals and labels used."""
    machine, human = np.asarray(machine, float), np.asarray(human, float)
    relations, similarity = np.asarray(relations, str), np.asarray(similarity, float)
    labelled = ~np.isnan(human)
    names = sorted(set(relations))
    # strata: relations with enough labels for their own variance, the rest as one (a stratum of three labels
    # underestimates its variance: 11 of 15 intervals covered on the README grid with 40 labels in 13 relations)
    overall = stratified_ppi_mean(human[labelled], machine[labelled], relations[labelled], machine[~labelled],
                                  relations[~labelled], alpha, min_labels=MIN_PER_RELATION)
    result = {"lrcr_calibrated": overall.value, "lrcr_calibrated_ci_low": max(overall.low, 0.0),
              "lrcr_calibrated_ci_high": min(overall.high, 1.0), "labels_used": float(labelled.sum()),
              "opi_1_calibrated": _formula3(machine, human, relations, similarity, names)}
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero((relations == r) & part) for r in names for part in (labelled, ~labelled)]
    draws = []
    for _ in range(resamples):
        index = np.concatenate([rng.choice(g, size=len(g)) for g in groups if len(g)])
        draws.append(_formula3(machine[index], human[index], relations[index], similarity[index], names))
    result["opi_1_calibrated_ci_low"], result["opi_1_calibrated_ci_high"] = (
        float(np.quantile(draws, alpha / 2)), float(np.quantile(draws, 1 - alpha / 2)))
    for relation, value, count in zip(names, _relation_lrcr(machine, human, relations, names),
                                      [(labelled & (relations == r)).sum() for r in names]):
        if count >= MIN_PER_RELATION:
            result[f"lrcr_calibrated.{relation}"] = float(value)
    return result


def labels_for_width(width: float, residual_variance: float | None, answers: int, alpha: float = 0.05) -> int:
    """Human labels for a calibrated LRCR interval of half-width ``width`` (at most every answer)."""
    if not 0 < width < 1:
        raise ValueError(f"width must be in (0, 1), got {width}")
    needed = labels_needed(width, residual_variance, alpha)
    return int(min(needed, answers)) if not math.isnan(needed) else answers
