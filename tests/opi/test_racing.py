"""A race's data: rounds of whole clusters stratified by relation, and per-cluster scores (hand-checked)."""
import pandas as pd
import pytest

from opi.data import Example
from opi.racing import beta_of, cluster_scores, in_rounds, rounds_of


def examples(clusters: int, per_cluster: int = 2) -> list[Example]:
    relations = ["deductive", "fuzzy", "adversarial"]
    return [Example(f"c{c}-{i}", f"article {c}", f"q{c}{i}", "a", relations[c % 3], group=f"c{c}")
            for c in range(clusters) for i in range(per_cluster)]


def test_rounds_deal_every_cluster_once_whole_and_stratified_by_relation():
    data = examples(30)
    plan = rounds_of(data, 5, seed=3)
    assert sorted(c for r in plan for c in r) == sorted({e.cluster for e in data})  # each cluster once
    assert [len(r) for r in plan] == [6] * 5
    relation = {e.cluster: e.relation for e in data}
    for clusters in plan:  # 10 clusters of each relation over 5 rounds: two of each in every round
        assert sorted(relation[c] for c in clusters) == sorted(["adversarial", "deductive", "fuzzy"] * 2)
    assert rounds_of(data, 5, seed=3) == plan and rounds_of(data, 5, seed=4) != plan  # seeded
    assert rounds_of(list(reversed(data)), 5, seed=3) == plan  # whatever the data's order


def test_in_rounds_keeps_whole_clusters_of_the_rounds_asked_in_the_data_s_order():
    data = examples(12, per_cluster=3)
    plan = rounds_of(data, 4, seed=0)
    second = in_rounds(data, 4, 2, 2, seed=0)
    assert {e.cluster for e in second} == set(plan[1]) and len(second) == 3 * len(plan[1])
    assert [e.id for e in second] == [e.id for e in data if e.cluster in set(plan[1])]
    assert {e.cluster for e in in_rounds(data, 4, 1, 3, seed=0)} == set(plan[0] + plan[1] + plan[2])
    assert len(in_rounds(data, 4, 1, 4, seed=0)) == len(data)


def test_cluster_scores_by_hand():
    rows = pd.DataFrame({"cluster": ["a", "a", "b", "b"], "similarity": [0.8, 0.4, -0.2, None],
                         "relation": ["x", "y", "x", "x"], "predicted_relation": ["x", "x", "x", "y"],
                         "ndcg_at_4": [1.0, 0.5, 0.0, None]})
    assert cluster_scores(rows, "bertsim") == pytest.approx({"a": 0.6, "b": 0.0})  # negative -> 0, missing -> 0
    assert cluster_scores(rows, "lrcr") == pytest.approx({"a": 0.5, "b": 0.5})
    # OPI-1 of a: 2 * 0.6 * 0.5 / 1.1; of b: B = 0 -> 0
    assert cluster_scores(rows, "opi_1") == pytest.approx({"a": 0.6 / 1.1, "b": 0.0})
    # OPI-2 of a: 5 * 0.6 * 0.5 / (0.6 + 4 * 0.5)
    assert cluster_scores(rows, "opi_2")["a"] == pytest.approx(1.5 / 2.6)
    assert cluster_scores(rows, "ndcg_at_4") == pytest.approx({"a": 0.75, "b": 0.0})  # a missing value skipped
    with pytest.raises(ValueError, match="the race metric mrr is not in this configuration's results"):
        cluster_scores(rows, "mrr")


def test_the_beta_of_an_opi_name():
    assert (beta_of("opi_1"), beta_of("opi_0_5"), beta_of("opi_2")) == (1.0, 0.5, 2.0)
