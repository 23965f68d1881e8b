import json

import numpy as np
import pandas as pd
import pytest

from opi.data import DataError
from opi.regression import explain, failed, judge, read_baseline_file, write_baseline_file

BASE = {"kNN": {"opi_1": 0.40, "bertsim": 0.60, "lrcr": 0.30}, "BM25": {"opi_1": 0.39, "bertsim": 0.60, "lrcr": 0.29},
        "EDI": {"opi_1": 0.33, "bertsim": 0.52, "lrcr": 0.25}}


def verdict(table, configuration, metric):
    return table.set_index(["configuration", "metric"]).loc[(configuration, metric), "verdict"]


def test_numbers_only_baseline_uses_the_tolerance():
    tonight = {"kNN": {"opi_1": 0.35, "bertsim": 0.595, "lrcr": 0.32},  # -0.05, -0.005, +0.02
               "BM25": dict(BASE["BM25"]), "SVM": {"opi_1": 0.5, "bertsim": 0.5, "lrcr": 0.5}}
    table = judge(tonight, BASE, tolerance=0.01)
    assert verdict(table, "kNN", "opi_1") == "regression"
    assert verdict(table, "kNN", "bertsim") == "ok"          # within tolerance
    assert verdict(table, "kNN", "lrcr") == "improved"
    assert verdict(table, "BM25", "opi_1") == "ok"
    assert verdict(table, "EDI", "opi_1") == "missing"       # gone tonight: fails the night
    assert verdict(table, "SVM", "opi_1") == "new"
    assert table.set_index(["configuration", "metric"]).loc[("kNN", "opi_1"), "change"] == pytest.approx(-0.05)
    assert set(failed(table)["configuration"]) == {"kNN", "EDI"}
    message = explain(table)
    assert "kNN: opi_1 fell 0.0500 (0.4000 -> 0.3500)" in message and "EDI: no opi_1 tonight" in message


def rows(similarity, correct):
    n = len(similarity)
    relation = np.array(["deductive", "fuzzy"] * (n // 2))
    return pd.DataFrame({"id": [f"e{i}" for i in range(n)], "relation": relation,
                         "predicted_relation": np.where(correct, relation, "unknown"), "similarity": similarity})


def test_with_predictions_a_drop_must_also_be_significant():
    rng = np.random.default_rng(0)
    base_similarity = rng.uniform(0.5, 0.9, 40)
    correct = rng.random(40) < 0.5
    baseline_rows = {"kNN": rows(base_similarity, correct)}
    noisy = rows(base_similarity + rng.normal(-0.02, 0.1, 40), correct)  # a small shift inside the noise
    broken = rows(base_similarity - 0.3, correct)                        # every answer much worse
    for tonight_rows, expected in [({"kNN": noisy}, "ok"), ({"kNN": broken}, "regression")]:
        current = {"kNN": {"opi_1": 0.0, "bertsim": float(tonight_rows["kNN"]["similarity"].mean()), "lrcr": 0.5}}
        base = {"kNN": {"opi_1": 0.0, "bertsim": float(base_similarity.mean()), "lrcr": 0.5}}
        table = judge(current, base, tonight_rows, baseline_rows, tolerance=0.01, permutations=999)
        row = table.set_index(["configuration", "metric"]).loc[("kNN", "bertsim")]
        assert row["change"] < -0.01 and row["p_value"] is not None
        assert row["verdict"] == expected, row


def test_baseline_file_round_trip_and_errors(tmp_path):
    path = write_baseline_file(tmp_path / "b.json", BASE, "mlflow run abc")
    assert read_baseline_file(path) == BASE
    data = json.loads(path.read_text())
    data["configurations"]["kNN"]["lrcr"] = "high"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=r"configuration 'kNN', field 'lrcr': a number is required, got 'high'"):
        read_baseline_file(path)
    with pytest.raises(DataError, match="does not exist"):
        read_baseline_file(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DataError, match="is not JSON"):
        read_baseline_file(tmp_path / "bad.json")
