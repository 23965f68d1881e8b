"""Coverage of prediction-powered intervals on clustered data with a known truth: by article (cluster-robust
variance, ``opi.metrics.ppi``) against per question (examples independent, ppi_py's formula).

    python benchmarks/cluster_ppi.py [--repetitions 1000] [--seed 0] [--icc 0.3] [--label-shares 0.1,0.2,0.3,0.5]

Each repetition draws a data set afresh: 20-60 articles of 4-12 questions (``tests.helpers.clustered.articles``).
Article g has a human rate p_g and a machine rate s_g, each Beta-distributed with intra-article correlation ``icc``
(Beta(μ·(1/icc - 1), (1-μ)·(1/icc - 1)): a question's 0/1 label given its article is Bernoulli, so the labels'
ICC is exactly ``icc``), linked by a Gaussian copula (correlation ``LINK``); a question's human label y = [u < p_g]
and machine label f = [v < s_g], with v = u for ``AGREEMENT`` of the questions (so the machine mostly agrees with
the person) and a fresh uniform otherwise. The machine is biased: E f = ``MACHINE_MEAN`` against the truth
E y = ``HUMAN_MEAN``. People label a random share of the questions (at least ``MIN_LABELS``), for each of
``--label-shares``. Reported: the share of 95 % intervals that hold the truth, and their mean half-width, for PPI++
(λ as ppi_py's) by article and per question, plain PPI (λ = 1) and PPI++ with the cluster-tuned λ by article, and
the stratified PPI++ (four relations drawn per question, so the strata cross the articles) by article and per
question.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import beta, norm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from opi.metrics.ppi import ppi_mean, stratified_ppi_mean  # noqa: E402
from tests.helpers.clustered import articles  # noqa: E402

HUMAN_MEAN, MACHINE_MEAN = 0.6, 0.7  # the truth, and what the biased machine says on average
LINK, AGREEMENT = 0.8, 0.8
MIN_LABELS = 20
RELATIONS = np.array(["deductive", "fuzzy", "adversarial", "multi_hop"])
METHODS = ("article", "question", "article, λ = 1", "article, cluster-tuned λ", "stratified by article",
           "stratified per question")


def article_rates(uniform: np.ndarray, mean: float, icc: float) -> np.ndarray:
    """Beta(μ·(1/ρ - 1), (1-μ)·(1/ρ - 1)) quantiles of ``uniform``: mean μ, and Bernoulli draws from them have
    intra-article correlation ρ."""
    size = 1 / icc - 1
    return beta.ppf(uniform, mean * size, (1 - mean) * size)


def clustered_labels(rng: np.random.Generator, article: np.ndarray, icc: float) -> tuple[np.ndarray, np.ndarray]:
    """(human, machine) 0/1 labels of each question, as the module's docstring describes."""
    z = rng.standard_normal((article.max() + 1, 2))
    z[:, 1] = LINK * z[:, 0] + np.sqrt(1 - LINK**2) * z[:, 1]
    human_rate = article_rates(norm.cdf(z[:, 0]), HUMAN_MEAN, icc)
    machine_rate = article_rates(norm.cdf(z[:, 1]), MACHINE_MEAN, icc)
    u = rng.random(len(article))
    v = np.where(rng.random(len(article)) < AGREEMENT, u, rng.random(len(article)))
    return (u < human_rate[article]).astype(float), (v < machine_rate[article]).astype(float)


def estimates(rng: np.random.Generator, icc: float, label_share: float) -> dict:
    """One data set's intervals, by method."""
    article = articles(rng)
    y, f = clustered_labels(rng, article, icc)
    relations = rng.choice(RELATIONS, size=len(article))
    labelled = np.zeros(len(article), bool)
    labelled[rng.choice(len(article), max(MIN_LABELS, round(label_share * len(article))), replace=False)] = True
    parts = (y[labelled], f[labelled], f[~labelled])
    clusters = {"clusters": article[labelled], "clusters_unlabelled": article[~labelled]}
    strata = (y[labelled], f[labelled], relations[labelled], f[~labelled], relations[~labelled], 0.05, 10)
    return {"article": ppi_mean(*parts, **clusters), "question": ppi_mean(*parts),
            "article, λ = 1": ppi_mean(*parts, lam=1.0, **clusters),
            "article, cluster-tuned λ": ppi_mean(*parts, lam="clusters", **clusters),
            "stratified by article": stratified_ppi_mean(*strata, **clusters),
            "stratified per question": stratified_ppi_mean(*strata)}


def simulate(repetitions: int, seed: int = 0, icc: float = 0.3, label_share: float = 0.2
             ) -> dict[str, tuple[float, float]]:
    """Method -> (share of the 95 % intervals that hold the truth, mean half-width) over ``repetitions`` data sets."""
    rng = np.random.default_rng(seed)
    covered = {method: 0 for method in METHODS}
    widths = {method: 0.0 for method in METHODS}
    for _ in range(repetitions):
        for method, estimate in estimates(rng, icc, label_share).items():
            covered[method] += estimate.low <= HUMAN_MEAN <= estimate.high
            widths[method] += estimate.half_width
    return {method: (covered[method] / repetitions, widths[method] / repetitions) for method in METHODS}


def report(result: dict[str, tuple[float, float]]) -> str:
    return "\n".join(f"  {method:<26} covers {coverage:6.1%}   mean half-width {width:.4f}"
                     for method, (coverage, width) in result.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--icc", type=float, default=0.3)
    parser.add_argument("--label-shares", default="0.1,0.2,0.3,0.5", help="shares of the questions labelled")
    args = parser.parse_args()
    print(f"{args.repetitions} data sets per share, intra-article correlation {args.icc}, 20-60 articles x 4-12 "
          f"questions; truth {HUMAN_MEAN}, the machine's mean {MACHINE_MEAN}")
    for share in (float(s) for s in args.label_shares.split(",")):
        started = time.perf_counter()
        result = simulate(args.repetitions, args.seed, args.icc, share)
        print(f"{share:.0%} of the questions labelled (at least {MIN_LABELS}), "
              f"{time.perf_counter() - started:.1f} s:\n{report(result)}")


if __name__ == "__main__":
    main()
