"""opi.race: configurations dropped as clusters arrive; the best survives with probability >= 1 - alpha (simulated
with known truth: a fast version of benchmarks/race_simulation.py), and a clearly worse one is dropped early."""
import math

import numpy as np
import pytest

from opi.race import Race


def test_a_configuration_always_worse_by_the_whole_range_is_dropped_when_the_evidence_reaches_k_minus_1_over_alpha():
    race = Race(["l", "c"], clusters=100, alpha=0.05)
    # by hand: cluster 1 bets nothing (no difference seen yet); cluster 2 bets 1/2 (clipped from 0.8) on
    # 1 - (-1/99): wealth 1 + 0.5 * 1.0101 = 1.50505; ... the product passes (2 - 1) / 0.05 = 20 at cluster 9
    race.observe({"l": 1.0, "c": 0.0})
    assert race._wealth[0, 1] == 0.0
    race.observe({"l": 1.0, "c": 0.0})
    assert math.exp(race._wealth[0, 1]) == pytest.approx(1.50505, abs=1e-5)
    dropped = []
    while not dropped:
        dropped = race.observe({"l": 1.0, "c": 0.0})
    (gone,) = dropped
    assert (gone.configuration, gone.by, gone.clusters, gone.difference) == ("c", "l", 9, 1.0)
    assert gone.evidence >= 20 and race.alive == ["l"]


def simulate(effects, clusters, rng, noise=0.1, alpha=0.05, test="betting", indifference=0.0):
    """One race over clusters with a base of their own: each configuration's cluster mean is base + effect + noise,
    clipped to [0, 1]; the truly best is the highest mean over these clusters (the full grid's best). With an
    ``indifference``, whether one within it of the best survived."""
    base = rng.uniform(0.2, 0.8, clusters)
    means = np.clip(base[None, :] + np.asarray(effects)[:, None] + rng.normal(0, noise, (len(effects), clusters)),
                    0, 1)
    names = [f"c{i}" for i in range(len(effects))]
    race, spent = Race(names, clusters, alpha, test=test, indifference=indifference), 0
    for j in rng.permutation(clusters):
        spent += len(race.alive)
        race.observe({name: means[i, j] for i, name in enumerate(names) if name in race.alive})
        if len(race.alive) == 1 or race.settled:
            break
    truth = means.mean(axis=1)
    kept = max(truth[names.index(name)] for name in race.alive) >= truth.max() - indifference
    return kept, spent / (len(names) * clusters)


@pytest.mark.parametrize("spread", [0.0, 0.1])
def test_the_best_configuration_survives_at_least_1_minus_alpha_of_races(spread):
    rng = np.random.default_rng(0)
    effects = np.linspace(0, spread, 10)
    results = [simulate(effects, 52, rng) for _ in range(150)]
    assert np.mean([kept for kept, _ in results]) >= 0.95


def test_clearly_worse_configurations_are_dropped_before_the_data_runs_out():
    rng = np.random.default_rng(1)
    effects = np.r_[np.zeros(7), 0.3, 0.3, 0.4]  # seven far behind
    costs = [cost for _, cost in (simulate(effects, 60, rng) for _ in range(30))]
    assert np.mean(costs) < 0.6  # of the full grid's cluster evaluations


def test_the_asymptotic_sequence_drops_far_earlier_and_still_keeps_the_best():
    rng = np.random.default_rng(2)
    effects = np.linspace(0, 0.1, 10)
    betting = [simulate(effects, 52, rng, noise=0.03) for _ in range(100)]
    asymptotic = [simulate(effects, 52, rng, noise=0.03, test="asymptotic") for _ in range(100)]
    assert np.mean([kept for kept, _ in asymptotic]) >= 0.95
    assert np.mean([cost for _, cost in asymptotic]) < 0.6 < 0.9 < np.mean([cost for _, cost in betting])
    race = Race(["l", "c"], clusters=40, test="asymptotic")
    for i in range(9):  # no bound before min_clusters (10), however clear the difference
        assert race.observe({"l": 0.9, "c": 0.1 + 0.01 * (i % 2)}) == []
    (gone,) = race.observe({"l": 0.9, "c": 0.1})
    assert gone.clusters == 10 and 0 < gone.evidence < gone.difference


def test_survivors_within_the_margin_of_each_other_are_a_tie():
    rng = np.random.default_rng(3)
    race = Race(["a", "b", "c"], clusters=200, test="asymptotic")
    base = rng.uniform(0.3, 0.7, 200)
    ties = []
    for j in range(200):
        race.observe({"a": base[j] + rng.normal(0, 0.01), "b": base[j] + rng.normal(0, 0.01),
                      "c": base[j] + 0.002 + rng.normal(0, 0.01)})
        ties.append(race.tied(0.02))
    assert not any(ties[:9])  # no bound before min_clusters
    assert ties[-1] and race.alive == ["a", "b", "c"]  # equal within 0.02: nothing dropped, a tie
    assert not race.tied(0.0001)  # not within a margin smaller than what the data can show


def test_the_leader_drops_those_within_the_indifference_zone_and_is_then_never_dropped():
    race = Race(["a", "b", "c"], clusters=100, test="asymptotic", indifference=0.01)
    for i in range(9):
        assert race.observe({"a": 0.5 + 0.01 * (i % 2), "b": 0.5 + 0.01 * (i % 2), "c": 0.45 + 0.1 * (i % 2)}) == []
    # at min_clusters (10): a and b have been equal on every cluster (a difference of 0, no spread: its bounds are
    # [0, 0]); a leads (the first of the two highest) and drops b as within 0.01; c, 0.02 behind with a spread
    # of 0.09, is neither shown worse nor within 0.01
    (within,) = race.observe({"a": 0.5, "b": 0.5, "c": 0.45})
    assert (within.configuration, within.by, within.within, within.evidence) == ("b", "a", True, 0.0)
    assert race.alive == ["a", "c"] and not race.settled  # c can still be dropped
    for _ in range(60):  # c now leads by far: a would be shown worse, but it stands for b, so it stays
        race.observe({"a": 0.1, "c": 0.9})
    assert race.alive == ["a", "c"] and [e.configuration for e in race.eliminated] == ["b"]
    # nothing can be dropped any more: a is kept, and c is shown better than it
    assert race.settled and not race.all_kept and race._lower_bounds()[2, 0] > 0
    with pytest.raises(ValueError, match="0 with the betting test"):
        Race(["a", "b"], clusters=10, indifference=0.01)
    with pytest.raises(ValueError, match="indifference must be >= 0"):
        Race(["a", "b"], clusters=10, test="asymptotic", indifference=float("nan"))


def test_a_race_is_settled_once_a_leader_that_overtook_a_kept_configuration_is_shown_within_the_zone_of_it():
    race = Race(["a", "b", "c"], clusters=200, test="asymptotic", indifference=0.01)
    for i in range(9):
        race.observe({"a": 0.5 + 0.01 * (i % 2), "b": 0.5 + 0.01 * (i % 2), "c": 0.45 + 0.1 * (i % 2)})
    race.observe({"a": 0.5, "b": 0.5, "c": 0.45})  # a drops b as within 0.01 and is kept (as in the test above)
    settled_at = None
    for t in range(150):  # c now 0.005 ahead on every cluster: it overtakes a, but is never shown better than it
        value = 0.5 + 0.01 * (t % 2)
        race.observe({"a": value, "c": value + 0.005})
        lower = race._lower_bounds()
        assert race.settled == (lower[0, 2] > -0.01)  # a stands for c once a - c is bounded above -0.01
        assert not race.all_kept and race.alive == ["a", "c"]  # c is no configuration's stand-in: never kept
        if race.settled:
            settled_at = race.seen
            break
    # before that, a still led or c could still be shown better than a; the race would have run to the end
    assert settled_at == 62 and race._sum[0, 2] < 0  # by then c leads


@pytest.mark.parametrize("spread", [0.0, 0.2])
def test_with_an_indifference_zone_one_within_it_of_the_best_survives_at_a_fraction_of_the_cost(spread):
    rng = np.random.default_rng(4)
    effects = np.linspace(0, spread, 20)  # all equal; or 0.0105 apart, so only the best two are within 0.02
    zone = [simulate(effects, 120, rng, noise=0.03, test="asymptotic", indifference=0.02) for _ in range(60)]
    strict = [simulate(effects, 120, rng, noise=0.03, test="asymptotic") for _ in range(60)]
    assert np.mean([kept for kept, _ in zone]) >= 0.95 and np.mean([kept for kept, _ in strict]) >= 0.95
    assert np.mean([cost for _, cost in zone]) < 0.6 * np.mean([cost for _, cost in strict])  # 0.21 / 0.96, 0.10 / 0.20


def test_a_race_needs_two_configurations_and_a_level():
    with pytest.raises(ValueError, match="at least two distinct"):
        Race(["knn"], clusters=10)
    with pytest.raises(ValueError, match="alpha must be in"):
        Race(["knn", "bm25"], clusters=10, alpha=0)
    with pytest.raises(ValueError, match="test must be one of betting, asymptotic"):
        Race(["knn", "bm25"], clusters=10, test="t-test")


def test_a_difference_is_read_over_the_clusters_both_ran_with_its_bounds_from_min_clusters_on():
    race = Race(["a", "b", "c"], clusters=40, alpha=0.05, test="asymptotic", min_clusters=4)
    race.observe({"a": 0.6, "b": 0.5, "c": 0.1})
    assert race.difference("a", "b")[0] == pytest.approx(0.1)
    assert race.difference("a", "b")[1:] == (-math.inf, math.inf)  # no bound before min_clusters
    for value in (0.7, 0.5, 0.6, 0.8, 0.6, 0.7, 0.5):
        race.observe({name: v for name, v in {"a": value, "b": 0.6, "c": 0.0}.items() if name in race.alive})
    (gone,) = race.eliminated
    assert gone.configuration == "c" and race.eliminated_after("a", "c") == gone.clusters
    mean, low, high = race.difference("a", "c")
    assert low > 0 and low < mean < high  # the bound that dropped it, as it stood then
    assert mean == pytest.approx(gone.difference)
    mean, low, high = race.difference("a", "b")  # a - b: 0.1, 0.1, -0.1, 0, 0.2, 0, 0.1, -0.1
    assert mean == pytest.approx(0.3 / 8) and low < 0 < high and race.eliminated_after("a", "b") == race.seen == 8


def test_a_difference_s_bounds_stay_where_two_means_in_0_1_can_differ():
    race = Race(["a", "b"], clusters=40, alpha=0.05, test="asymptotic", min_clusters=2)
    for a, b in ((0.0, 1.0), (0.5, 0.5), (0.0, 1.0)):  # a - b: -1, 0, -1; the sequence's radius is 1.07 here
        race.observe({"a": a, "b": b})
    assert not race.eliminated
    mean, low, high = race.difference("a", "b")
    assert mean == pytest.approx(-2 / 3) and low == -1.0 and high == pytest.approx(-2 / 3 + 1.0665, abs=1e-3)
