"""Prediction-powered inference for a mean (Angelopoulos et al. 2023, "Prediction-powered inference"; PPI++:
Angelopoulos, Duchi & Zrnic 2023): many machine labels and a few human ones give an unbiased estimate of the
human-scale mean and an interval that is valid however wrong the machine is.

With n labelled items (human ``y``, machine ``f``) and N machine-only items (``f_unlabelled``), and a weight λ:

    estimate  = mean(λ·f_unlabelled) + mean(y - λ·f)
    interval  = estimate ± z(1-α/2)·sqrt(std0(λ·f_unlabelled)²/N + std0(y - λ·f)²/n)      (std0: ddof 0)
    tuned λ   = 2·cov0(y, f) / (2·(1 + n/N)·var1(f ∪ f_unlabelled)), clipped to [0, 1]      (var1: ddof 1)

λ = 1 is plain PPI, λ = 0 the human labels alone (classical); the tuned λ (PPI++) minimises the variance, so the
interval is never wider than the classical one, asymptotically. These are ``ppi_py``'s ``ppi_mean_pointestimate``,
``ppi_mean_ci`` and ``classical_mean_ci`` (unweighted, one dimension, two-sided), written out so OPI does not depend
on ppi_py's numba/statsmodels stack; the tests check them against ppi_py to 1e-9. Only where ppi_py returns NaN
(all machine labels equal: var1 = 0) does this return λ = 0 instead, which then changes nothing in the estimate.
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


def _z(alpha: float) -> float:
    return float(norm.ppf(1 - alpha / 2))


def _interval(value: float, standard_error: float, lam: float, n: int, big_n: int, alpha: float) -> Estimate:
    z = _z(alpha)
    return Estimate(float(value), float(value - z * standard_error), float(value + z * standard_error),
                    float(lam), n, big_n)


def tuned_lambda(y, f, f_unlabelled) -> float:
    """PPI++'s variance-optimal λ, clipped to [0, 1] (``ppi_py``'s ``_calc_lam_glm`` in one dimension)."""
    y, f, f_unlabelled = (np.asarray(a, float) for a in (y, f, f_unlabelled))
    n, big_n = len(y), len(f_unlabelled)
    if n == 0 or big_n == 0:
        return 0.0
    covariance = 2 * np.mean((y - y.mean()) * (f - f.mean()))
    variance = np.var(np.concatenate([f, f_unlabelled]), ddof=1)
    if variance == 0 or not np.isfinite(variance):  # ppi_py: NaN; λ does not matter when f is constant
        return 0.0
    return float(np.clip(covariance / (2 * (1 + n / big_n) * variance), 0.0, 1.0))


def _ppi(y: np.ndarray, f: np.ndarray, f_unlabelled: np.ndarray, lam: float | None) -> tuple[float, float, float]:
    """(estimate, standard error, λ) of the module's docstring."""
    lam = tuned_lambda(y, f, f_unlabelled) if lam is None else float(lam)
    value = np.mean(lam * f_unlabelled) + np.mean(y - lam * f)
    imputed, rectifier = np.std(lam * f_unlabelled), np.std(y - lam * f)
    standard_error = math.sqrt(imputed**2 / len(f_unlabelled) + rectifier**2 / len(y))
    return float(value), standard_error, lam


def _classical(y: np.ndarray) -> tuple[float, float, float]:
    """(mean, standard error, λ = 0) of the human labels alone."""
    return float(y.mean()), float(np.std(y) / math.sqrt(len(y))), 0.0


def ppi_mean(y, f, f_unlabelled, alpha: float = 0.05, lam: float | None = None) -> Estimate:
    """The PPI(++) mean of ``y`` (see the module's docstring): ``lam`` None is tuned (PPI++), 1 plain PPI, 0 classical.
    Without machine-only items, the classical mean of ``y`` (λ = 0, whatever ``lam``)."""
    y, f, f_unlabelled = (np.asarray(a, float).ravel() for a in (y, f, f_unlabelled))
    if len(y) == 0:
        raise ValueError("PPI needs at least one human label")
    if len(f) != len(y):
        raise ValueError(f"{len(y)} human labels but {len(f)} machine labels for them")
    if len(f_unlabelled) == 0:
        return classical_mean(y, alpha)
    value, standard_error, lam = _ppi(y, f, f_unlabelled, lam)
    return _interval(value, standard_error, lam, len(y), len(f_unlabelled), alpha)


def classical_mean(y, alpha: float = 0.05) -> Estimate:
    """The human labels alone: mean(y) ± z·std0(y)/sqrt(n) (PPI with λ = 0; ppi_py's ``classical_mean_ci``)."""
    y = np.asarray(y, float).ravel()
    if len(y) == 0:
        raise ValueError("a mean needs at least one label")
    return _interval(*_classical(y), len(y), 0, alpha)


def stratified_ppi_mean(y, f, strata, f_unlabelled, strata_unlabelled, alpha: float = 0.05,
                        min_labels: int = 2) -> Estimate:
    """PPI++ within each stratum h, combined with weights w_h = the stratum's share of all n + N items:
    estimate = Σ w_h·θ_h, variance = Σ w_h²·σ_h² (σ_h the stratum's standard error; strata sampled independently).

    A stratum with fewer than ``min_labels`` human labels (at least two are needed to estimate its variance; a few
    more to estimate it well) is pooled with the other such strata into one "rest" stratum; if the rest has fewer
    than two labels, the result is the unstratified PPI++ mean.
    The reported ``lam`` is the w-weighted mean of the strata's λ (a summary only)."""
    y, f, f_unlabelled = (np.asarray(a, float).ravel() for a in (y, f, f_unlabelled))
    strata, strata_unlabelled = np.asarray(strata, str).ravel(), np.asarray(strata_unlabelled, str).ravel()
    if len(strata) != len(y) or len(strata_unlabelled) != len(f_unlabelled):
        raise ValueError("one stratum per item is needed")
    counts = {s: int((strata == s).sum()) for s in set(strata) | set(strata_unlabelled)}
    small = [s for s, count in counts.items() if count < max(2, min_labels)]
    rest_labelled, rest_unlabelled = np.isin(strata, small), np.isin(strata_unlabelled, small)
    if 0 < rest_labelled.sum() + rest_unlabelled.sum() and rest_labelled.sum() < 2:
        return ppi_mean(y, f, f_unlabelled, alpha)
    groups = [(strata == s, strata_unlabelled == s) for s in sorted(counts) if s not in small]
    if small:
        groups.append((rest_labelled, rest_unlabelled))
    total, value, variance, lam = len(y) + len(f_unlabelled), 0.0, 0.0, 0.0
    for mine, theirs in groups:
        weight = (mine.sum() + theirs.sum()) / total
        if theirs.any():
            theta, standard_error, lam_h = _ppi(y[mine], f[mine], f_unlabelled[theirs], None)
        else:  # every item of the stratum labelled: its classical mean
            theta, standard_error, lam_h = _classical(y[mine])
        value += weight * theta
        variance += (weight * standard_error) ** 2
        lam += weight * lam_h
    return _interval(value, math.sqrt(variance), lam, len(y), len(f_unlabelled), alpha)


def labels_needed(width: float, residual_variance: float | None = None, alpha: float = 0.05) -> int:
    """Human labels n for an interval half-width <= ``width``: n = ceil(z²·σ²/width²) (at least 2), σ² the variance
    of the residuals (y - f, or y - λ·f) seen so far; with no labels yet (None or NaN) the worst case of a 0/1 mean,
    0.25, which PPI++ does not exceed. The machine-only term σ²(λ·f)/N is left out (N ≫ n)."""
    if not width > 0:
        raise ValueError(f"width must be positive, got {width}")
    variance = residual_variance
    if variance is None or not math.isfinite(variance):
        variance = WORST_CASE_VARIANCE
    return max(2, math.ceil((_z(alpha) / width) ** 2 * variance - 1e-9))
