import numpy as np
import pandas as pd
import pytest

from opi.metrics.opi import beta_key, lrcr, mean_opi, opi, per_relation_table, pooled_opi, summary


def test_opi_hand_values():
    assert opi(0.8, 0.5, 1) == pytest.approx(0.6154, abs=1e-4)   # 2*.4/1.3
    assert opi(0.8, 0.5, 2) == pytest.approx(0.7143, abs=1e-4)   # 5*.4/(.8+4*.5): leans towards B
    assert opi(0.8, 0.5, 0.5) == pytest.approx(0.5405, abs=1e-4)  # 1.25*.4/(.8+.25*.5): leans towards L


def test_opi_edge_cases():
    assert opi(0.0, 0.0) == 0.0
    assert opi(0.9, 0.0) == 0.0
    assert opi(1.0, 1.0, 2) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="beta > 0"):
        opi(0.5, 0.5, 0)


def test_formula_3_and_mean_of_opi_on_an_uneven_table():
    table = pd.DataFrame({"relation": ["r1", "r2"], "bertsim": [0.9, 0.6], "lrcr": [0.8, 0.2]})
    # Formula (3): (2/2) * (0.9+0.6) * (0.8+0.2) / (1.5 + 1.0) = 0.6
    assert pooled_opi(table, 1) == pytest.approx(0.6)
    # mean of per-relation OPI-1: (2*.72/1.7 + 2*.12/.8) / 2
    assert mean_opi(table, 1) == pytest.approx((1.44 / 1.7 + 0.3) / 2)
    assert mean_opi(table, 1) < pooled_opi(table, 1)


def test_lrcr_counts_exact_matches_and_unknown_as_wrong():
    assert lrcr(["a", "b", "c", "a"], ["a", "b", "unknown", "c"]) == 0.5


def test_summary_from_example_rows():
    rows = pd.DataFrame({
        "relation": ["A", "A", "B"],
        "predicted_relation": ["A", "B", "B"],
        "similarity": [1.0, 0.6, 0.5],
    })
    metrics, table = summary(rows, ["A", "B", "C"])
    assert list(table["relation"]) == ["A", "B"]  # C has no examples: left out, not zero
    assert table.set_index("relation").loc["A", "opi_1"] == pytest.approx(0.6154, abs=1e-4)
    assert table.set_index("relation").loc["B", "opi_1"] == pytest.approx(2 * 0.5 / 1.5)
    assert metrics["bertsim"] == pytest.approx(0.7)
    assert metrics["lrcr"] == pytest.approx(2 / 3)
    assert metrics["opi_1"] == pytest.approx(2 * 0.65 * 0.75 / 1.4)
    assert metrics["opi_1_mean"] == pytest.approx((0.8 / 1.3 + 1 / 1.5) / 2)
    assert metrics["relations_present"] == 2


def test_gold_labels_outside_the_set_are_an_error():
    rows = pd.DataFrame({"relation": ["Z"], "predicted_relation": ["Z"], "similarity": [1.0]})
    with pytest.raises(ValueError, match="not in the label set"):
        per_relation_table(rows, ["A"])


def test_beta_keys():
    assert [beta_key(b) for b in (0.5, 1, 2.0)] == ["opi_0_5", "opi_1", "opi_2"]


def test_a_huge_or_tiny_beta_cannot_overflow_into_nan():
    # β -> inf: OPI -> B (all weight on BERTSim); β -> 0: OPI -> L. Formula: (1+β²)·B·L / (B + β²·L)
    assert opi(0.8, 0.5, 1e300) == pytest.approx(0.8) and opi(0.8, 0.5, 1e-300) == pytest.approx(0.5)
    assert opi(0.8, 0.5, 1e6) == pytest.approx((1 + 1e12) * 0.4 / (0.8 + 1e12 * 0.5))  # = 0.8 to 1e-12
    with np.errstate(all="raise"):  # no overflow, no invalid value on the way
        assert np.isfinite(opi(np.array([0.8, 0.0]), np.array([0.5, 0.0]), 1e300)).all()
