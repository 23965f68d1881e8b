import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import false_discovery_control

from opi.data import DataError
from opi.metrics.stats import compare
from opi.regression import (GateSettings, NotComparable, explain, failed, judge, markdown, read_baseline_file, value,
                            write_baseline_file)

BASE = {"kNN": {"opi_1": 0.40, "bertsim": 0.60, "lrcr": 0.30}, "BM25": {"opi_1": 0.39, "bertsim": 0.60, "lrcr": 0.29},
        "EDI": {"opi_1": 0.33, "bertsim": 0.52, "lrcr": 0.25}}
RELATIONS = ["deductive", "fuzzy", "causal", "temporal"]


def at(table, configuration, metric, column="verdict"):
    return table.set_index(["configuration", "metric"]).loc[(configuration, metric), column]


def test_numbers_only_baseline_uses_the_tolerance_and_says_so():
    tonight = {"kNN": {"opi_1": 0.35, "bertsim": 0.595, "lrcr": 0.32},  # -0.05, -0.005, +0.02
               "BM25": dict(BASE["BM25"]), "SVM": {"opi_1": 0.5, "bertsim": 0.5, "lrcr": 0.5}}
    judgement = judge(tonight, BASE, settings=GateSettings(tolerance=0.01))
    table = judgement.table
    assert at(table, "kNN", "opi_1") == "regression"
    assert at(table, "kNN", "bertsim") == "ok"          # within tolerance
    assert at(table, "kNN", "lrcr") == "improved"
    assert at(table, "BM25", "opi_1") == "ok"
    assert at(table, "EDI", "opi_1") == "missing"       # gone tonight: fails the night
    assert at(table, "SVM", "opi_1") == "new"
    assert at(table, "kNN", "opi_1", "change") == pytest.approx(-0.05)
    assert set(failed(table)["configuration"]) == {"kNN", "EDI"}
    message = explain(table)
    assert "kNN: opi_1 fell 0.0500 (0.4000 -> 0.3500)" in message and "EDI: no opi_1 tonight" in message
    assert judgement.notes == ("the baseline has numbers only (no per-example predictions): a change larger than the "
                               "tolerance (0.01) decides each verdict, without a paired test",)


def rows(similarity, correct, per_article=None, ids=None):
    """Per-example rows over relations in turn; ``per_article``: consecutive examples share an article."""
    n = len(similarity)
    relation = np.array([RELATIONS[i % 2] for i in range(n)])
    frame = pd.DataFrame({"id": ids if ids is not None else [f"e{i}" for i in range(n)], "relation": relation,
                          "predicted_relation": np.where(correct, relation, "unknown"), "similarity": similarity})
    if per_article:
        frame["cluster"] = [f"a{i // per_article}" for i in range(n)]
    return frame


def numbers(frames):
    """Each configuration's metrics as its run logs them (computed from its rows)."""
    return {name: {"opi_1": value(f, "opi"), "bertsim": value(f, "bertsim"), "lrcr": value(f, "lrcr")}
            for name, f in frames.items()}


def test_with_predictions_a_drop_must_also_be_significant():
    rng = np.random.default_rng(0)
    base_similarity = rng.uniform(0.5, 0.9, 40)
    correct = rng.random(40) < 0.5
    baseline_rows = {"kNN": rows(base_similarity, correct)}
    noisy = rows(base_similarity + rng.normal(-0.02, 0.1, 40), correct)  # a small shift inside the noise
    broken = rows(base_similarity - 0.3, correct)                        # every answer much worse
    for tonight_rows, expected in [({"kNN": noisy}, "ok"), ({"kNN": broken}, "regression")]:
        judgement = judge(numbers(tonight_rows), numbers(baseline_rows), tonight_rows, baseline_rows,
                          GateSettings(tolerance=0.01, permutations=999))
        row = judgement.table.set_index(["configuration", "metric"]).loc[("kNN", "bertsim")]
        assert row["change"] < -0.01 and row["p_value"] is not None
        assert row["verdict"] == expected, row
        # one verdict with a p-value per metric; lrcr is unchanged: p = 1
        assert row["p_adjusted"] == pytest.approx(false_discovery_control(
            judgement.table["p_value"].astype(float))[1])


def test_a_baseline_on_fewer_examples_is_compared_on_the_examples_both_runs_share():
    """A champion measured on 104 examples (13 articles) against tonight's 416 (52 articles): one line says so, and
    the values, change and test are those of the 104 shared examples, not tonight's 416."""
    rng = np.random.default_rng(1)
    similarity, correct = rng.uniform(0.3, 0.9, 416), rng.random(416) < 0.5
    tonight = {"kNN": rows(similarity, correct, per_article=8)}
    shared = tonight["kNN"].iloc[:104]
    champion = {"kNN": rows(np.clip(similarity[:104] + 0.2, 0, 1), correct[:104], per_article=8)}
    judgement = judge(numbers(tonight), numbers(champion), tonight, champion, GateSettings(permutations=999))
    assert judgement.notes[0] == "comparing on the 104 examples both runs share (baseline 104, tonight 416)"
    assert "paired permutation tests by article: 13 articles, 104 questions" in judgement.notes[1]
    table = judgement.table
    assert at(table, "kNN", "bertsim", "current") == pytest.approx(shared["similarity"].mean())
    assert at(table, "kNN", "bertsim", "current") != pytest.approx(similarity.mean())  # not tonight's whole set
    assert at(table, "kNN", "bertsim", "baseline") == pytest.approx(champion["kNN"]["similarity"].mean())
    expected = compare(shared, champion["kNN"], "bertsim", resamples=999, unit="article")
    assert at(table, "kNN", "bertsim", "change") == pytest.approx(expected.difference)
    assert at(table, "kNN", "bertsim", "p_value") == pytest.approx(expected.p_value)
    assert at(table, "kNN", "bertsim") == "regression"


def test_a_configuration_a_race_eliminated_early_is_judged_on_the_examples_it_ran():
    """A raced night: S-Two was eliminated after its first 16 of 48 examples, the others ran all 48. Each is paired
    with the baseline on the examples both of its runs have, and a line says S-Two's were fewer."""
    rng = np.random.default_rng(3)
    similarity, correct = rng.uniform(0.3, 0.9, 48), rng.random(48) < 0.5
    champion = {name: rows(similarity, correct, per_article=4) for name in ("kNN", "S-Two")}
    tonight = {"kNN": rows(similarity, correct, per_article=4),
               "S-Two": rows(np.clip(similarity[:16] - 0.3, 0, 1), correct[:16], per_article=4)}
    judgement = judge(numbers(tonight), numbers(champion), tonight, champion, GateSettings(permutations=999))
    ran = champion["S-Two"].iloc[:16]
    expected = compare(tonight["S-Two"], ran, "bertsim", resamples=999, unit="article")
    assert at(judgement.table, "S-Two", "bertsim", "baseline") == pytest.approx(ran["similarity"].mean())
    assert at(judgement.table, "S-Two", "bertsim", "change") == pytest.approx(expected.difference)
    assert at(judgement.table, "S-Two", "bertsim", "p_value") == pytest.approx(expected.p_value)
    assert at(judgement.table, "kNN", "bertsim", "change") == 0
    assert judgement.notes[-1] == ("S-Two: judged on the 16 of the 48 shared examples that both its runs have (a "
                                   "raced configuration eliminated early ran fewer)")


def test_too_few_shared_examples_are_refused_not_judged_by_the_tolerance():
    similarity, correct = np.linspace(0.3, 0.9, 400), np.arange(400) % 3 == 0
    champion = {"kNN": rows(similarity, correct)}
    for kept, refused in [(360, False), (359, True)]:  # 90 % of the baseline's 400 examples is the least
        tonight = {"kNN": champion["kNN"].iloc[:kept]}
        if refused:
            with pytest.raises(NotComparable, match=r"^tonight's run has 359 of the baseline's 400 examples \(90%, "
                                                     r"tonight 359\), below min_overlap 90%"):
                judge(numbers(tonight), numbers(champion), tonight, champion, GateSettings(permutations=99))
        else:
            judgement = judge(numbers(tonight), numbers(champion), tonight, champion, GateSettings(permutations=99))
            assert judgement.notes[0] == "comparing on the 360 examples both runs share (baseline 400, tonight 360)"
            assert set(judgement.table["verdict"]) == {"ok"} and (judgement.table["change"] == 0).all()
    tonight = {"kNN": champion["kNN"].iloc[:200]}
    assert judge(numbers(tonight), numbers(champion), tonight, champion,
                 GateSettings(min_overlap=0.5, permutations=99)).notes[0].startswith("comparing on the 200 examples")


def test_chance_p_values_below_alpha_among_45_verdicts_do_not_fail_the_gate_after_adjustment():
    """15 configurations x 3 metrics whose results tonight differ from the baseline's by noise only: several drops
    beyond the tolerance have unadjusted p < 0.05 (the gate used to fail on them); adjusted over the 45, none does."""
    rng = np.random.default_rng(3)
    base, tonight = {}, {}
    for c in range(15):
        similarity, correct = rng.uniform(0.4, 0.9, 104), rng.random(104) < 0.6
        base[f"C{c}"] = rows(similarity, correct, per_article=8)
        tonight[f"C{c}"] = rows(np.clip(similarity + rng.normal(0, 0.08, 104), 0, 1),
                                np.where(rng.random(104) < 0.15, ~correct, correct), per_article=8)
    table = judge(numbers(tonight), numbers(base), tonight, base, GateSettings()).table
    assert len(table) == 45 and table["p_value"].notna().all()
    by_chance = table[(table["p_value"] < 0.05) & (table["change"] < -0.01)]
    assert len(by_chance) == 7  # what the unadjusted gate would have called regressions
    assert np.allclose(table["p_adjusted"].astype(float), false_discovery_control(table["p_value"].astype(float)))
    assert (by_chance["p_adjusted"] >= 0.05).all() and set(table["verdict"]) == {"ok"}
    assert failed(table).empty


def test_the_paired_test_swaps_whole_articles():
    """Six articles whose answers moved together: per question the drop looks certain, per article it is six
    draws, four down and two up, and not evidence of a regression."""
    shifts = np.repeat([-0.2, -0.2, -0.2, 0.15, -0.2, 0.15], 10)
    similarity = np.linspace(0.4, 0.8, 60)
    correct = np.ones(60, dtype=bool)
    base = {"kNN": rows(similarity, correct, per_article=10)}
    tonight = {"kNN": rows(similarity + shifts + np.linspace(-0.01, 0.01, 60), correct, per_article=10)}
    verdicts = {}
    for unit in ("article", "example"):
        judgement = judge(numbers(tonight), numbers(base), tonight, base, GateSettings(unit=unit, permutations=999))
        verdicts[unit] = (at(judgement.table, "kNN", "bertsim"), at(judgement.table, "kNN", "bertsim", "p_value"))
        expected = compare(tonight["kNN"], base["kNN"], "bertsim", resamples=999, unit=unit).p_value
        assert verdicts[unit][1] == pytest.approx(expected)
    assert verdicts["example"][0] == "regression" and verdicts["example"][1] < 0.01
    assert verdicts["article"][0] == "ok" and verdicts["article"][1] > 0.05
    notes = judge(numbers(tonight), numbers(base), tonight, base, GateSettings(permutations=99)).notes
    assert "paired permutation tests by article: 6 articles, 60 questions" in notes[0]
    assert notes[1].startswith("only 6 articles")  # fewer than 10 clusters: said in one line


def test_verdicts_markdown_shows_short_names_and_escapes_the_bar():
    full = "kNN | extractive | local-clf"
    tonight = {full: {"opi_1": 0.35, "bertsim": 0.6, "lrcr": 0.3}, "BM25 | x": BASE["BM25"]}
    judgement = judge(tonight, {full: BASE["kNN"], "BM25 | x": BASE["BM25"]})
    text = markdown(judgement, ["Baseline: run abc"], {full: "kNN"})
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert text.startswith("Baseline: run abc\n\nThe baseline has numbers only")
    assert table[2].startswith("| BM25 \\| x ") and table[5].startswith("| kNN ")  # a name without a short one
    # every row has as many unescaped cell separators as the header
    separators = [line.replace(r"\|", "").count("|") for line in table]
    assert set(separators) == {9} and len(table) == 2 + 6


def test_gate_settings_are_checked():
    for wrong, message in [({"tolerance": -0.1}, "tolerance must be a finite number >= 0"),
                           ({"tolerance": float("inf")}, "tolerance must be a finite number >= 0, got inf"),
                           ({"alpha": 1.0}, "alpha must be a finite number in"),
                           ({"alpha": float("nan")}, "alpha must be a finite number in"),
                           ({"min_overlap": 0}, "min_overlap must be a finite number in"),
                           ({"unit": "relation"}, "unit must be")]:
        with pytest.raises(ValueError, match=message):
            GateSettings(**wrong)


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
