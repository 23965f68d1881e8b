"""Prediction-powered means: equal to ppi_py's, a case by hand, and valid intervals where the machine is wrong."""
import math

import numpy as np
import pytest

from opi.metrics.ppi import classical_mean, labels_needed, ppi_mean, stratified_ppi_mean, tuned_lambda

ppi_py = pytest.importorskip("ppi_py")  # the reference implementation (dev extra)


def arrays(kind: str, seed: int):
    rng = np.random.default_rng(seed)
    if kind == "binary":  # relation correct by people / by the classifier, 80 % agreement
        y = rng.integers(0, 2, 100).astype(float)
        return y, np.where(rng.random(100) < 0.8, y, 1 - y), rng.integers(0, 2, 400).astype(float)
    y = rng.choice([0, 3, 7], 100).astype(float)  # 0-3-7: people vs the LLM judge
    return y, np.clip(y + rng.choice([-3, 0, 3], 100), 0, 7), rng.choice([0, 3, 7], 400).astype(float)


@pytest.mark.parametrize("kind", ["binary", "scores"])
@pytest.mark.parametrize("lam", [None, 1.0, 0.3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_estimates_and_intervals_equal_ppi_py(kind, lam, seed):
    y, f, unlabelled = arrays(kind, seed)
    ours = ppi_mean(y, f, unlabelled, alpha=0.05, lam=lam)
    point = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, f, unlabelled, lam=lam)))
    low, high = (float(np.squeeze(v)) for v in ppi_py.ppi_mean_ci(y, f, unlabelled, alpha=0.05, lam=lam))
    assert ours.value == pytest.approx(point, abs=1e-9)
    assert (ours.low, ours.high) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))


def test_a_case_by_hand():
    y, f, unlabelled = np.array([1, 0, 1, 1.0]), np.array([1, 1, 1, 0.0]), np.array([1, 0, 1, 1, 0, 1.0])
    # plain PPI: mean(unlabelled) = 4/6; rectifier mean(f - y) = (0 + 1 + 0 - 1)/4 = 0 -> 2/3
    plain = ppi_mean(y, f, unlabelled, lam=1)
    assert plain.value == pytest.approx(2 / 3)
    # spread: std0(unlabelled)^2/6 = (2/9)/6; std0(y - f) = std0([0, -1, 0, 1]) -> variance 1/2, /4 = 1/8
    assert plain.half_width == pytest.approx(1.959963984540054 * math.sqrt(2 / 54 + 1 / 8))
    # tuned: cov0(y, f) = mean((y - 3/4)(f - 3/4)) = (1/16 - 3/16 + 1/16 - 3/16)/4 = -1/16 < 0 -> lambda clipped to 0
    assert tuned_lambda(y, f, unlabelled) == 0.0
    assert ppi_mean(y, f, unlabelled).value == classical_mean(y).value == 0.75


def test_without_machine_only_items_the_estimate_is_the_human_mean():
    assert ppi_mean([1, 0, 1], [1, 1, 1], []).value == pytest.approx(2 / 3)


def test_strata_are_weighted_by_their_share_and_small_ones_pooled():
    rng = np.random.default_rng(3)
    y, f = rng.integers(0, 2, 60).astype(float), rng.integers(0, 2, 60).astype(float)
    strata = np.array(["a"] * 30 + ["b"] * 29 + ["c"])  # c has one label: pooled with nothing else -> "rest"
    unlabelled, unlabelled_strata = rng.integers(0, 2, 240).astype(float), np.array(["a"] * 100 + ["b"] * 140)
    both = stratified_ppi_mean(y, f, strata, unlabelled, unlabelled_strata)
    parts = [ppi_mean(y[strata == s], f[strata == s], unlabelled[unlabelled_strata == s]) for s in "ab"]
    rest = ppi_mean(y[strata == "c"], f[strata == "c"], [])
    weights = [130 / 300, 169 / 300, 1 / 300]
    assert both.value == pytest.approx(sum(w * p.value for w, p in zip(weights, [*parts, rest])))


def test_labels_needed_for_a_width():
    assert labels_needed(0.05) == math.ceil((1.959963984540054 / 0.05) ** 2 * 0.25)  # 385, the worst case
    assert labels_needed(0.05, 0.1) == math.ceil((1.959963984540054 / 0.05) ** 2 * 0.1)


def test_calibrated_intervals_cover_the_truth_where_raw_lrcr_does_not_and_rank_better():
    """Two configurations: A's answers express the gold relation more often (true LRCR 0.60 vs 0.50), but the
    classifier is kinder to B's (it misses 30 % of A's correct answers, 5 % of B's, and calls 10 % of wrong ones
    right for both), so raw LRCR ranks B first. 2,000 seeded repetitions, 100 human labels of 500 answers each."""
    rng = np.random.default_rng(0)
    reps, size, n = 2000, 500, 100
    truth = {"A": 0.60, "B": 0.50}
    miss, false_hit = {"A": 0.30, "B": 0.05}, 0.10
    covered = {"calibrated": 0, "raw": 0}
    right_order = {"calibrated": 0, "raw": 0}
    for _ in range(reps):
        values = {}
        for name in "AB":
            y = (rng.random(size) < truth[name]).astype(float)
            f = np.where(y == 1, rng.random(size) >= miss[name], rng.random(size) < false_hit).astype(float)
            calibrated = ppi_mean(y[:n], f[:n], f[n:])
            raw = classical_mean(f)  # the machine labels alone, as raw LRCR's interval
            covered["calibrated"] += calibrated.low <= truth[name] <= calibrated.high
            covered["raw"] += raw.low <= truth[name] <= raw.high
            values[name] = (calibrated.value, raw.value)
        right_order["calibrated"] += values["A"][0] > values["B"][0]
        right_order["raw"] += values["A"][1] > values["B"][1]
    coverage = {k: v / (2 * reps) for k, v in covered.items()}
    order = {k: v / reps for k, v in right_order.items()}
    print(f"\ncoverage of the 95 % intervals: {coverage}; right order of A and B: {order}")
    assert 0.93 <= coverage["calibrated"] <= 0.97
    assert coverage["raw"] < 0.5
    assert order["calibrated"] > order["raw"]
