import math

import numpy as np
import pytest
from scipy.stats import norm

from opi.metrics.ppi import Estimate, classical_mean, labels_needed, ppi_mean, stratified_ppi_mean, tuned_lambda

ppi_py = pytest.importorskip("ppi_py")  # the reference implementation (dev extra: ppi-python)


def binary(seed: int, n: int = 100, big_n: int = 400):
    """Relation correctness: human 1 with probability 0.7, the machine agrees with the human 85 % of the time."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n + big_n) < 0.7).astype(float)
    f = np.where(rng.random(n + big_n) < 0.85, y, 1 - y)
    return y[:n], f[:n], f[n:]


def scores(seed: int, n: int = 60, big_n: int = 300):
    """0/3/7 scores: the judge gives the human's score 60 % of the time, otherwise any of the three."""
    rng = np.random.default_rng(seed)
    y = rng.choice([0.0, 3.0, 7.0], size=n + big_n, p=[0.3, 0.3, 0.4])
    f = np.where(rng.random(n + big_n) < 0.6, y, rng.choice([0.0, 3.0, 7.0], size=n + big_n))
    return y[:n], f[:n], f[n:]


def reference_lambda(y, f, f_unlabelled) -> float:
    """ppi_py's λ, computed the way ``ppi_mean_ci`` does (its gradients at the plain-PPI estimate)."""
    from ppi_py.ppi import _calc_lam_glm

    centre = ppi_py.ppi_mean_pointestimate(y, f, f_unlabelled, lam=1)
    return float(_calc_lam_glm(y[:, None] - centre, f[:, None] - centre, f_unlabelled[:, None] - centre,
                               np.eye(1), clip=True))


CASES = [binary(seed) for seed in (0, 1, 2)] + [binary(3, n=30, big_n=1000)] + [scores(seed) for seed in (4, 5)]


@pytest.mark.parametrize("data", CASES)
@pytest.mark.parametrize("lam", [None, 1.0, 0.0])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_equals_ppi_py(data, lam, alpha):
    y, f, f_unlabelled = data
    ours = ppi_mean(y, f, f_unlabelled, alpha=alpha, lam=lam)
    value = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, f, f_unlabelled, lam=lam)))
    low, high = (float(np.squeeze(b)) for b in ppi_py.ppi_mean_ci(y, f, f_unlabelled, alpha=alpha, lam=lam))
    assert ours.value == pytest.approx(value, abs=1e-9)
    assert (ours.low, ours.high) == pytest.approx((low, high), abs=1e-9)
    expected_lam = reference_lambda(y, f, f_unlabelled) if lam is None else lam
    assert ours.lam == pytest.approx(expected_lam, abs=1e-9)
    assert (ours.n, ours.N) == (len(y), len(f_unlabelled))


@pytest.mark.parametrize("data", CASES)
def test_tuned_lambda_is_strictly_inside_and_the_classical_interval_equals_ppi_py(data):
    y, f, f_unlabelled = data
    assert 0 < tuned_lambda(y, f, f_unlabelled) < 1  # the cases exercise the formula, not the clipping
    low, high = ppi_py.classical_mean_ci(y, alpha=0.05)
    assert (classical_mean(y).low, classical_mean(y).high) == pytest.approx((low, high), abs=1e-9)


def test_tiny_case_by_hand():
    y, f = [1, 0, 1, 1], [1, 0, 0, 1]
    f_unlabelled = [1, 1, 0, 1, 0, 1]
    z = norm.ppf(0.975)
    # λ: mean y = 3/4, mean f = 1/2; centred products (1/4)(1/2), (-3/4)(-1/2), (1/4)(-1/2), (1/4)(1/2)
    # = 1/8, 3/8, -1/8, 1/8: cov0 = (4/8)/4 = 1/8. All ten f: six ones, var1 = (6·0.16 + 4·0.36)/9 = 4/15.
    # λ = 2·(1/8) / (2·(1 + 4/6)·(4/15)) = (1/8)/(4/9) = 9/32.
    # θ = mean y + λ·(mean f_unlabelled - mean f) = 3/4 + (9/32)·(2/3 - 1/2) = 3/4 + 3/64 = 51/64.
    # Variance: λ²·var0(f_unlabelled)/N = (81/1024)·(2/9)/6 = 3/1024;
    # y - λf = 23/32, 0, 1, 23/32: mean 39/64, mean of squares 2082/4096, var0 = 561/4096, /n = 561/16384.
    # Total 48/16384 + 561/16384 = 609/16384.
    tuned = ppi_mean(y, f, f_unlabelled)
    assert tuned.lam == pytest.approx(9 / 32)
    assert tuned.value == pytest.approx(51 / 64)
    assert tuned.half_width == pytest.approx(z * math.sqrt(609 / 16384))
    # Plain PPI: θ = 4/6 + mean(y - f) = 2/3 + 1/4 = 11/12; variance (2/9)/6 + (1/4·3/4)/4 = 1/27 + 3/64 = 145/1728.
    plain = ppi_mean(y, f, f_unlabelled, lam=1)
    assert (plain.value, plain.half_width) == pytest.approx((11 / 12, z * math.sqrt(145 / 1728)))
    # Classical: 3/4 ± z·sqrt((3/16)/4).
    for classical in (classical_mean(y), ppi_mean(y, f, [])):
        assert classical == Estimate(0.75, 0.75 - z * math.sqrt(3 / 64), 0.75 + z * math.sqrt(3 / 64), 0.0, 4, 0)


def test_degenerate_inputs():
    with pytest.raises(ValueError):
        ppi_mean([], [], [1, 0])
    with pytest.raises(ValueError):
        ppi_mean([1, 0], [1], [1, 0])
    constant = ppi_mean([1, 0, 1], [1, 1, 1], [1, 1])  # all machine labels equal: ppi_py's λ is NaN, ours 0
    assert constant.lam == 0 and constant.value == pytest.approx(2 / 3)


def test_stratified():
    (y1, f1, u1), (y2, f2, u2) = binary(10, n=40, big_n=160), binary(11, n=20, big_n=280)
    y2 = y2 * (np.arange(20) % 3 > 0)  # a worse stratum
    both = stratified_ppi_mean(np.r_[y1, y2], np.r_[f1, f2], ["a"] * 40 + ["b"] * 20, np.r_[u1, u2],
                               ["a"] * 160 + ["b"] * 280)
    a, b = ppi_mean(y1, f1, u1), ppi_mean(y2, f2, u2)
    assert both.value == pytest.approx(0.4 * a.value + 0.6 * b.value)
    assert both.half_width == pytest.approx(math.hypot(0.4 * a.half_width, 0.6 * b.half_width))
    # One stratum: PPI++ itself. A stratum with one label ("c") or none ("d") joins the rest: here c + d, two labels.
    assert stratified_ppi_mean(y1, f1, ["a"] * 40, u1, ["a"] * 160) == a
    pooled = stratified_ppi_mean(np.r_[y1, 1, 0], np.r_[f1, 1, 1], ["a"] * 40 + ["c", "d"], np.r_[u1, 1, 0],
                                 ["a"] * 160 + ["c", "d"])
    rest = ppi_mean([1, 0], [1, 1], [1, 0])
    assert pooled.value == pytest.approx((200 * a.value + 4 * rest.value) / 204)
    # A rest with fewer than two labels: the unstratified estimate.
    lone = stratified_ppi_mean(np.r_[y1, 1], np.r_[f1, 1], ["a"] * 40 + ["c"], np.r_[u1, 0], ["a"] * 160 + ["d"])
    assert lone == ppi_mean(np.r_[y1, 1], np.r_[f1, 1], np.r_[u1, 0])


def test_labels_needed():
    z = norm.ppf(0.975)
    assert labels_needed(0.1) == math.ceil(z**2 * 0.25 / 0.01) == 97  # the classical worst case of a 0/1 mean
    assert labels_needed(0.1, float("nan")) == 97
    assert labels_needed(0.05, 0.04) == math.ceil(z**2 * 0.04 / 0.0025) == 62
    assert labels_needed(0.5, 0.0) == 2
    n = labels_needed(0.05, 0.1)
    assert z * math.sqrt(0.1 / n) <= 0.05 < z * math.sqrt(0.1 / (n - 1))
    with pytest.raises(ValueError):
        labels_needed(0.0)


def test_simulation_calibrated_lrcr_covers_the_truth_and_ranks_right_where_raw_lrcr_does_not():
    """Two configurations: B answers right more often (true LRCR 0.65 > 0.60), but A's classifier calls wrong answers
    right half the time, so raw LRCR (machine-judged, on all 500 answers) puts A first (0.74 > 0.5875)."""
    repetitions, n, big_n = 2000, 100, 400
    rng = np.random.default_rng(2024)
    configurations = {"A": (0.60, 0.90, 0.50), "B": (0.65, 0.85, 0.10)}  # truth, P(machine 1 | right), (| wrong)
    z = norm.ppf(0.975)
    found = {}
    for name, (truth, hit, false_alarm) in configurations.items():
        human = rng.random((repetitions, n + big_n)) < truth
        machine = np.where(human, rng.random(human.shape) < hit, rng.random(human.shape) < false_alarm)
        human, machine = human.astype(float), machine.astype(float)
        raw = machine.mean(1)
        raw_covers = np.abs(raw - truth) <= z * machine.std(1) / math.sqrt(n + big_n)
        estimates = [ppi_mean(h[:n], m[:n], m[n:]) for h, m in zip(human, machine)]
        calibrated = np.array([e.value for e in estimates])
        covers = np.array([e.low <= truth <= e.high for e in estimates])
        found[name] = raw, calibrated, raw_covers.mean(), covers.mean()
        print(f"{name}: true LRCR {truth:.3f}, raw {raw.mean():.4f} (interval covers {raw_covers.mean():.1%}), "
              f"calibrated {calibrated.mean():.4f} (covers {covers.mean():.1%}, mean λ "
              f"{np.mean([e.lam for e in estimates]):.2f}, half-width {np.mean([e.half_width for e in estimates]):.3f})")
    raw_right = (found["B"][0] > found["A"][0]).mean()
    calibrated_right = (found["B"][1] > found["A"][1]).mean()
    print(f"B ranked above A: raw {raw_right:.1%}, calibrated {calibrated_right:.1%}")
    for name in configurations:
        assert abs(found[name][1].mean() - configurations[name][0]) < 0.005  # unbiased
        assert 0.93 <= found[name][3] <= 0.97
        assert found[name][2] < 0.5
    assert raw_right < 0.05 < 0.6 < calibrated_right
