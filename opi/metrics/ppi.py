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

**By cluster** (``clusters``/``clusters_unlabelled``: each item's cluster, its article; questions on one article are
correlated). Every estimate here is a weighted sum of means, θ = Σ_t w_t·mean(v_t) (PPI: v = λ·f_unlabelled and
v = y - λ·f, w = 1; stratified: the same per stratum h, w = w_h). Its influence terms are, for item i of part t,

    ψ_i = w_t·(v_i - mean(v_t)) / |t|          (so Σ_i ψ_i² = Σ_t w_t²·std0(v_t)²/|t|: the formula above)

and the cluster-robust (sandwich, CR1) variance sums them within each cluster g first, across parts and strata, so
the covariance between the labelled and unlabelled parts (and between strata) of a shared article is in it:

    var = c·Σ_g (Σ_{i∈g} ψ_i)²,   c = G/(G-1)·(M-1)/M                        (Σ_g of the totals is 0: no centring)

(θ̂ - θ ≈ Σ_g T_g, T_g the cluster's total of the influence terms with the true means, independent across clusters
drawn at random, so Var θ̂ ≈ Σ_g E T_g²), with G clusters among the M items (labelled and unlabelled). c is CR1's
small-sample factor G/(G-1) taken relative to ppi_py's ddof-0 variances; the interval is
estimate ± t(1-α/2; G-1)·sqrt(var), Student's t with G - 1 degrees of freedom being the usual reference for a
variance from G cluster totals (Cameron & Miller 2015, "A practitioner's guide to cluster-robust inference").
Where every cluster holds one item (G = M) both give way to ppi_py's (c = 1, z): the interval is ppi_py's exactly.
One cluster: no interval (±∞). The stratified estimate's weights w_h are the data's relation mix, taken as fixed.

λ stays ppi_py's (tuned from the items): any fixed λ keeps the estimate unbiased and the variance above is that of
the λ used, so the interval stays valid. ``lam="clusters"`` instead minimises the cluster-robust variance itself
(``cluster_tuned_lambda``); it has only G - 1 degrees of freedom to fit, so with few clusters it makes that variance
look smaller than it is (two clusters: zero), and in ``benchmarks/cluster_ppi.py`` its intervals are no narrower
and cover about a point less: not the default. PPI++'s tuned λ makes intervals a little short with few labels,
clustered or not (20 independent labels: ~91 % of ppi_py's 95 % intervals cover, ~94 % with λ = 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm
from scipy.stats import t as student_t

WORST_CASE_VARIANCE = 0.25  # of a 0/1 mean: the classical interval's, which PPI++ does not exceed

Term = tuple[np.ndarray, float, "np.ndarray | None"]  # values v_t, weight w_t, each value's cluster (None: none)
Spread = tuple[float, "int | None", "int | None"]  # standard error, clusters G, degrees of freedom of its quantile


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float
    lam: float  # the weight on the machine labels (0: the human labels alone)
    n: int  # human labels
    N: int  # machine-only items
    clusters: int | None = None  # G, where the variance is by cluster

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def _z(alpha: float) -> float:
    return float(norm.ppf(1 - alpha / 2))


def _quantile(alpha: float, degrees: int | None) -> float:
    """z(1-α/2), or Student's t(1-α/2; ``degrees``) where the variance is from cluster totals."""
    return _z(alpha) if degrees is None else float(student_t.ppf(1 - alpha / 2, degrees))


def _interval(value: float, spread: Spread, lam: float, n: int, big_n: int, alpha: float) -> Estimate:
    standard_error, clusters, degrees = spread
    q = _quantile(alpha, degrees) if math.isfinite(standard_error) else 1.0
    return Estimate(float(value), float(value - q * standard_error), float(value + q * standard_error),
                    float(lam), n, big_n, clusters)


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


def cluster_totals(psi: np.ndarray, clusters) -> np.ndarray:
    """Σ_{i∈g} ψ_i for each cluster g (in order of first appearance)."""
    codes, names = pd.factorize(np.asarray(clusters))
    return np.bincount(codes, psi, len(names))


def cluster_tuned_lambda(y, f, f_unlabelled, clusters, clusters_unlabelled) -> float:
    """The λ that minimises the cluster-robust variance, clipped to [0, 1]: with cluster totals
    m_g = Σ_{L∩g} (y_i - ȳ)/n and d_g = Σ_{U∩g} (f_j - f̄_U)/N - Σ_{L∩g} (f_i - f̄_L)/n, the variance is
    c·Σ_g (m_g + λ·d_g)², least at λ = -Σ m_g·d_g / Σ d_g² (0 where every d_g is 0)."""
    y, f, f_unlabelled = (np.asarray(a, float) for a in (y, f, f_unlabelled))
    n, big_n = len(y), len(f_unlabelled)
    if n == 0 or big_n == 0:
        return 0.0
    clusters = np.concatenate([np.asarray(clusters), np.asarray(clusters_unlabelled)])
    m = cluster_totals(np.r_[(y - y.mean()) / n, np.zeros(big_n)], clusters)
    d = cluster_totals(np.r_[-(f - f.mean()) / n, (f_unlabelled - f_unlabelled.mean()) / big_n], clusters)
    spread = float(d @ d)
    return float(np.clip(-(m @ d) / spread, 0.0, 1.0)) if spread > 0 else 0.0


def combined(terms: Sequence[Term]) -> tuple[float, Spread]:
    """(θ = Σ_t w_t·mean(v_t), (its standard error, G, degrees of freedom)) for ``terms`` (v_t, w_t, clusters_t):
    independent items (sqrt(Σ_t w_t²·std0(v_t)²/|t|), z) where any term has no clusters, else cluster-robust (the
    module's docstring: t with G - 1 degrees of freedom unless every cluster holds one item)."""
    value = float(sum(w * v.mean() for v, w, _ in terms))
    if any(c is None for *_, c in terms):
        return value, (math.sqrt(sum(w**2 * np.var(v) / len(v) for v, w, _ in terms)), None, None)
    psi = np.concatenate([w * (v - v.mean()) / len(v) for v, w, _ in terms])
    totals = cluster_totals(psi, np.concatenate([np.asarray(c) for *_, c in terms]))
    g, m = len(totals), len(psi)
    if g < 2:
        return value, (math.inf, g, None)
    variance = g / (g - 1) * (m - 1) / m * float(totals @ totals)
    return value, (math.sqrt(variance), g, None if g == m else g - 1)


def _terms(y: np.ndarray, f: np.ndarray, f_unlabelled: np.ndarray, lam: float, clusters, clusters_unlabelled
           ) -> list[Term]:
    """PPI's two parts as terms; without machine-only items, the human labels alone."""
    if len(f_unlabelled) == 0:
        return [(y, 1.0, clusters)]
    return [(lam * f_unlabelled, 1.0, clusters_unlabelled), (y - lam * f, 1.0, clusters)]


def _lambda(y, f, f_unlabelled, lam, clusters, clusters_unlabelled) -> float:
    if lam is None:
        return tuned_lambda(y, f, f_unlabelled)
    if lam == "clusters":
        if clusters is None:
            raise ValueError('lam="clusters" needs the clusters')
        return cluster_tuned_lambda(y, f, f_unlabelled, clusters, clusters_unlabelled)
    return float(lam)


def _checked_clusters(clusters, size: int, what: str):
    if clusters is None:
        return None
    clusters = np.asarray(clusters).ravel()
    if len(clusters) != size:
        raise ValueError(f"{size} {what} but {len(clusters)} clusters for them")
    return clusters


def ppi_mean(y, f, f_unlabelled, alpha: float = 0.05, lam: float | str | None = None, clusters=None,
             clusters_unlabelled=None) -> Estimate:
    """The PPI(++) mean of ``y`` (see the module's docstring): ``lam`` None is tuned (PPI++), 1 plain PPI, 0 classical,
    "clusters" tuned on the cluster-robust variance. ``clusters``/``clusters_unlabelled``: each item's cluster (both
    or neither; None: items independent). Without machine-only items, the classical mean of ``y`` (λ = 0)."""
    y, f, f_unlabelled = (np.asarray(a, float).ravel() for a in (y, f, f_unlabelled))
    if len(y) == 0:
        raise ValueError("PPI needs at least one human label")
    if len(f) != len(y):
        raise ValueError(f"{len(y)} human labels but {len(f)} machine labels for them")
    if (clusters is None) != (clusters_unlabelled is None):
        raise ValueError("clusters are needed for the labelled and the unlabelled items, or for neither")
    clusters = _checked_clusters(clusters, len(y), "human labels")
    clusters_unlabelled = _checked_clusters(clusters_unlabelled, len(f_unlabelled), "machine-only items")
    lam = _lambda(y, f, f_unlabelled, lam, clusters, clusters_unlabelled) if len(f_unlabelled) else 0.0
    value, spread = combined(_terms(y, f, f_unlabelled, lam, clusters, clusters_unlabelled))
    return _interval(value, spread, lam, len(y), len(f_unlabelled), alpha)


def classical_mean(y, alpha: float = 0.05, clusters=None) -> Estimate:
    """The human labels alone: mean(y) ± z·std0(y)/sqrt(n) (PPI with λ = 0; ppi_py's ``classical_mean_ci``), or
    its cluster-robust variance with ``clusters``."""
    y = np.asarray(y, float).ravel()
    if len(y) == 0:
        raise ValueError("a mean needs at least one label")
    value, spread = combined([(y, 1.0, _checked_clusters(clusters, len(y), "labels"))])
    return _interval(value, spread, 0.0, len(y), 0, alpha)


def stratified_ppi_mean(y, f, strata, f_unlabelled, strata_unlabelled, alpha: float = 0.05,
                        min_labels: int = 2, clusters=None, clusters_unlabelled=None) -> Estimate:
    """PPI++ within each stratum h, combined with weights w_h = the stratum's share of all n + N items (the data's
    mix, taken as fixed): estimate = Σ w_h·θ_h; variance = Σ w_h²·σ_h² (σ_h the stratum's standard error; strata
    independent), or with clusters the cluster-robust variance of the influence terms w_h·ψ_i summed within each
    cluster across strata (an article has questions of several relations; the module's docstring).

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
        return ppi_mean(y, f, f_unlabelled, alpha, clusters=clusters, clusters_unlabelled=clusters_unlabelled)
    groups = [(strata == s, strata_unlabelled == s) for s in sorted(counts) if s not in small]
    if small:
        groups.append((rest_labelled, rest_unlabelled))
    if (clusters is None) != (clusters_unlabelled is None):
        raise ValueError("clusters are needed for the labelled and the unlabelled items, or for neither")
    labelled_clusters = _checked_clusters(clusters, len(y), "human labels")
    unlabelled_clusters = _checked_clusters(clusters_unlabelled, len(f_unlabelled), "machine-only items")
    total, terms, lam = len(y) + len(f_unlabelled), [], 0.0
    for mine, theirs in groups:
        weight = (mine.sum() + theirs.sum()) / total
        lam_h = tuned_lambda(y[mine], f[mine], f_unlabelled[theirs])  # 0 where every item is labelled
        part = _terms(y[mine], f[mine], f_unlabelled[theirs], lam_h, _part(labelled_clusters, mine),
                      _part(unlabelled_clusters, theirs))
        terms += [(v, weight * w, c) for v, w, c in part]
        lam += weight * lam_h
    value, spread = combined(terms)
    return _interval(value, spread, lam, len(y), len(f_unlabelled), alpha)


def _part(clusters, mask):
    return None if clusters is None else clusters[mask]


MIN_ICC_CLUSTERS = 10  # an ICC from fewer clusters, or fewer items beyond one per cluster, is not estimated


def intraclass_correlation(values, clusters, min_clusters: int = MIN_ICC_CLUSTERS,
                           min_within: int = MIN_ICC_CLUSTERS) -> float | None:
    """One-way ANOVA estimate of the intra-cluster correlation over the clusters of two or more items (a cluster of
    one tells nothing of pairs: with its items, a few odd values alone in their clusters would make ρ = 1), clipped
    to [0, 1]: ρ = (MSB - MSW) / (MSB + (m0 - 1)·MSW), MSB = Σ_g M_g·(ȳ_g - ȳ)²/(G - 1),
    MSW = Σ_g Σ_i (y_i - ȳ_g)²/(M - G), m0 = (M - Σ_g M_g²/M)/(G - 1). None with fewer than ``min_clusters`` such
    clusters, fewer than ``min_within`` within-cluster degrees of freedom (M - G), or no spread at all."""
    values = np.asarray(values, float)
    codes = pd.factorize(np.asarray(clusters))[0]
    paired = np.bincount(codes)[codes] >= 2
    values, codes = values[paired], pd.factorize(codes[paired])[0]
    g, m = int(codes.max(initial=-1)) + 1, len(values)
    if g < max(min_clusters, 2) or m - g < max(min_within, 1):
        return None
    sizes = np.bincount(codes, minlength=g)
    means = np.bincount(codes, values, g) / sizes
    between = float(sizes @ (means - values.mean()) ** 2) / (g - 1)
    within = float(((values - means[codes]) ** 2).sum()) / (m - g)
    m0 = (m - float(sizes @ sizes) / m) / (g - 1)
    spread = between + (m0 - 1) * within
    return float(np.clip((between - within) / spread, 0.0, 1.0)) if spread > 0 else None


def same_cluster_share(clusters) -> float:
    """k = Σ_g M_g·(M_g - 1) / (M·(M - 1)): the chance that two items drawn at random share a cluster."""
    sizes = np.bincount(pd.factorize(np.asarray(clusters))[0]).astype(float)
    m = sizes.sum()
    return float(sizes @ (sizes - 1) / (m * (m - 1))) if m > 1 else 0.0


def design_effect(labels: float, icc: float = 0.0, same_cluster: float = 0.0) -> float:
    """1 + (m - 1)·ρ with m = 1 + (n - 1)·k: the labels expected to share a label's cluster (itself included) when
    n labels are drawn at random from the items (k: ``same_cluster_share``). The variance of a mean of n such labels
    is σ²/n times this."""
    return 1 + (labels - 1) * same_cluster * icc


def labels_needed(width: float, residual_variance: float | None = None, alpha: float = 0.05, icc: float = 0.0,
                  same_cluster: float = 0.0) -> float:
    """Human labels n for an interval half-width <= ``width``: the least n with z²·σ²·deff(n)/n <= width², σ² the
    variance of the residuals (y - f, or y - λ·f) seen so far (with no labels yet, None or NaN: the worst case of a
    0/1 mean, 0.25, which PPI++ does not exceed), deff(n) = ``design_effect(n, icc, same_cluster)``. With
    n0 = z²·σ²/width²: n = n0·(1 - kρ)/(1 - n0·kρ) (n0 itself without clusters), at least 2; ``math.inf`` where
    n0·kρ >= 1 (the clusters' own spread is wider than ``width`` however many labels). The machine-only term
    σ²(λ·f)/N is left out (N ≫ n)."""
    if not width > 0:
        raise ValueError(f"width must be positive, got {width}")
    variance = residual_variance
    if variance is None or not math.isfinite(variance):
        variance = WORST_CASE_VARIANCE
    n0, shared = (_z(alpha) / width) ** 2 * variance, same_cluster * icc
    if n0 * shared >= 1:
        return math.inf
    return max(2, math.ceil(n0 * (1 - shared) / (1 - n0 * shared) - 1e-9))
