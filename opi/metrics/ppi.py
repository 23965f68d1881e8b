"""Prediction-powered inference for a mean (Angelopoulos et al. 2023, "Prediction-powered inference"; PPI++:
Angelopoulos, Duchi & Zrnic 2023): many machine labels and a few human ones give an unbiased estimate of the
human-scale mean and an interval that is valid however wrong the machine is.

With n labelled items (human ``y``, machine ``f``) and N machine-only items (``f_unlabelled``), and a weight λ:

    estimate  = λ·mean(f_unlabelled) + mean(y - λ·f)
    interval  = estimate ± z(1-α/2)·sqrt(std0(λ·f_unlabelled)²/N + std0(y - λ·f)²/n)      (std0: ddof 0)
    tuned λ   = cov0(y, f) / ((1 + n/N)·var1(f ∪ f_unlabelled)), clipped to [0, 1]           (var1: ddof 1)

λ = 1 is plain PPI, λ = 0 the human labels alone (classical); the tuned λ (PPI++) minimises the variance, so the
interval is never wider than the classical one, asymptotically. These are ``ppi_py``'s ``ppi_mean_pointestimate``
and ``ppi_mean_ci`` (unweighted, one dimension), written out so OPI does not depend on ppi_py's numba/statsmodels
stack; the tests check them against ppi_py to 1e-9.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

WORST_CASE_VARIANCE = 0.25  # of a 0/1 mean: the classical interval's, which PPI++ does not exceed


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float
    lam: float  # the weight on the machine labels (0: the human labels alone)
    n: int  # human labels
    N: int  # machine-only items

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def tuned_lambda(y, f, f_unlabelled) -> float:
    """PPI++'s variance-optimal λ, clipped to [0, 1] (``ppi_py``'s ``_calc_lam_glm`` in one dimension)."""
    y, f, f_unlabelled = (np.asarray(a, float) for a in (y, f, f_unlabelled))
    n, big_n = len(y), len(f_unlabelled)
    covariance = 2 * np.mean((y - y.mean()) * (f - f.mean()))
    variance = np.var(np.concatenate([f, f_unlabelled]), ddof=1)
    if variance == 0 or not np.isfinite(variance):
        return 0.0
    return float(np.clip(covariance / (2 * (1 + n / big_n) * variance), 0.0, 1.0))


def ppi_mean(y, f, f_unlabelled, alpha: float = 0.05, lam: float | None = None) -> Estimate:
    """The PPI(++) mean of ``y`` (see the module's docstring); ``lam`` None is tuned. Without machine-only items, the
    classical mean of ``y``."""
    y, f, f_unlabelled = (np.asarray(a, float) for a in (y, f, f_unlabelled))
    if len(y) == 0:
        raise ValueError("PPI needs at least one human label")
    if len(f) != len(y):
        raise ValueError(f"{len(y)} human labels but {len(f)} machine labels for them")
    if len(f_unlabelled) == 0:
        return classical_mean(y, alpha)
    if lam is None:
        lam = tuned_lambda(y, f, f_unlabelled)
    n, big_n = len(y), len(f_unlabelled)
    value = float(np.mean(lam * f_unlabelled) + np.mean(y - lam * f))
    spread = math.sqrt(np.std(lam * f_unlabelled) ** 2 / big_n + np.std(y - lam * f) ** 2 / n)
    z = norm.ppf(1 - alpha / 2)
    return Estimate(value, value - z * spread, value + z * spread, float(lam), n, big_n)


def classical_mean(y, alpha: float = 0.05) -> Estimate:
    """The human labels alone: mean ± z·std0(y)/sqrt(n) (PPI with λ = 0)."""
    y = np.asarray(y, float)
    value, spread = float(y.mean()), float(np.std(y) / math.sqrt(len(y)))
    z = norm.ppf(1 - alpha / 2)
    return Estimate(value, value - z * spread, value + z * spread, 0.0, len(y), 0)


def stratified_ppi_mean(y, f, strata, f_unlabelled, strata_unlabelled, alpha: float = 0.05) -> Estimate:
    """PPI++ within each stratum, combined with weights w_h = the stratum's share of all n + N items:
    estimate = Σ w_h·θ_h, variance = Σ w_h²·σ_h² (the strata are sampled independently). A stratum with fewer
    than two labels cannot estimate its own variance: such strata are pooled into one ("the rest"); when the rest
    has no label at all, the estimate is the unstratified PPI++ mean."""
    y, f, f_unlabelled = (np.asarray(a, float) for a in (y, f, f_unlabelled))
    strata, strata_unlabelled = np.asarray(strata, str), np.asarray(strata_unlabelled, str)
    counts = {s: int((strata == s).sum()) for s in set(strata) | set(strata_unlabelled)}
    rest = "\0rest"
    merge = {s: (rest if counts[s] < 2 else s) for s in counts}
    strata = np.array([merge[s] for s in strata])
    strata_unlabelled = np.array([merge[s] for s in strata_unlabelled])
    total, value, variance, lams = len(y) + len(f_unlabelled), 0.0, 0.0, []
    z = norm.ppf(1 - alpha / 2)
    for stratum in sorted(set(strata) | set(strata_unlabelled)):
        mine, theirs = strata == stratum, strata_unlabelled == stratum
        if not mine.any():  # items nobody labelled, and no stratum to pool them with: one unstratified estimate
            return ppi_mean(y, f, f_unlabelled, alpha)
        estimate = ppi_mean(y[mine], f[mine], f_unlabelled[theirs], alpha)
        weight = (mine.sum() + theirs.sum()) / total
        value += weight * estimate.value
        variance += (weight * estimate.half_width / z) ** 2
        lams.append(estimate.lam)
    spread = math.sqrt(variance)
    return Estimate(value, value - z * spread, value + z * spread, float(np.mean(lams)), len(y), len(f_unlabelled))


def labels_needed(width: float, residual_variance: float | None = None, alpha: float = 0.05) -> int:
    """Human labels for an interval half-width ``width``: z²·σ²/width², σ² the variance of (y - λ·f) seen so far,
    or with no labels yet the worst case of a 0/1 mean (0.25). The machine-only term is left out (N ≫ n)."""
    variance = WORST_CASE_VARIANCE if residual_variance is None else residual_variance
    return max(2, math.ceil((norm.ppf(1 - alpha / 2) / width) ** 2 * variance))
