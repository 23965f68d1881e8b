import pandas as pd
import pytest

from opi.metrics.opi import summary
from opi.report import Configuration, ReportSettings, build_report, display
from opi.schemas import ReportConfig
from tests.helpers.synthetic import prediction_rows

RELATIONS = ["direct_matching", "deductive", "fuzzy"]
FAST = ReportSettings(ReportConfig(resamples=400, permutations=999))


def predictions(similarity: float, accuracy: float, seed: int, n: int = 20) -> pd.DataFrame:
    return prediction_rows(n, similarity, accuracy, seed, RELATIONS, spread=0.1)


def configurations(runs: dict[str, pd.DataFrame], kinds: dict[str, str] | None = None) -> list[Configuration]:
    kinds = kinds or {}
    return [Configuration(name, kinds.get(name, "single"), name.split(" | ")[0], frame) for name, frame in runs.items()]


@pytest.fixture(scope="module")
def runs():
    return {"kNN | extractive | local-clf": predictions(0.70, 0.60, seed=1),
            "A-Two | extractive | local-clf": predictions(0.70, 0.60, seed=2),
            "EDI | extractive | local-clf": predictions(0.30, 0.10, seed=3)}


KINDS = {"A-Two | extractive | local-clf": "A-"}


def test_tables_match_direct_computation(runs):
    report = build_report(configurations(runs, KINDS), RELATIONS, FAST)
    for row in report.overall.to_dict("records"):
        metrics, table = summary(runs[row["configuration"]], RELATIONS)
        for name in ("bertsim", "lrcr", "opi_1", "opi_1_mean"):
            assert row[name] == pytest.approx(metrics[name]), name
        assert row["opi_1_ci_low"] <= row["opi_1"] <= row["opi_1_ci_high"]
        assert row["retrieved_words_mean"] == pytest.approx(runs[row["configuration"]]["retrieved_words"].mean())
        assert list(report.relation_tables["opi_1"][row["configuration"]]) == pytest.approx(list(table["opi_1"]))
    assert list(report.overall["opi_1"]) == sorted(report.overall["opi_1"], reverse=True)
    by_similarity = sorted(runs, key=lambda name: -runs[name]["similarity"].mean())
    assert list(report.answer_quality["configuration"]) == by_similarity and by_similarity[-1].startswith("EDI")
    assert report.overall.set_index("configuration")["kind"].to_dict() == {
        "kNN | extractive | local-clf": "single", "A-Two | extractive | local-clf": "A-",
        "EDI | extractive | local-clf": "single"}


def test_verdicts_separate_a_real_gap_from_noise(runs):
    report = build_report(configurations(runs, KINDS), RELATIONS, FAST)
    verdict = report.overall.set_index("configuration")["verdict"]
    assert verdict["EDI | extractive | local-clf"] == "lower"
    assert sorted(verdict[["kNN | extractive | local-clf", "A-Two | extractive | local-clf"]]) == [
        "best", "not distinguishable"]
    headline = report.headline()
    runner_up = report.overall["configuration"].iloc[1]
    assert "Not distinguishable" in headline and runner_up in headline.split("Not distinguishable")[1]
    assert "EDI" not in headline.split("Not distinguishable")[1]
    strengths = report.strengths.set_index("relation")
    for relation in RELATIONS:  # the best per relation is the arg-max of that relation's row
        row = report.relation_tables["opi_1"].loc[relation]
        assert strengths.loc[relation, "best"] == row.idxmax()
        assert strengths.loc[relation, "margin"] == pytest.approx(row.max() - row.nlargest(2).iloc[1])


def test_write_produces_the_report_files(runs, tmp_path):
    report = build_report(configurations(runs, KINDS), RELATIONS, FAST)
    paths = report.write(tmp_path)
    names = {p.name for p in paths}
    assert {"overall.csv", "per_relation.csv", "strengths.csv", "answer_quality.csv", "relation_opi_1.csv",
            "heatmap.png", "bars.png", "report.md", "report.html"} <= names
    assert (tmp_path / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (tmp_path / "report.html").read_text()
    assert "<table" in html and 'src="bars.png"' in html and "A-Two | extractive | local-clf" in html
    assert "Combinations (the paper's Table 4)" in (tmp_path / "report.md").read_text()
    assert pd.read_csv(tmp_path / "overall.csv")["configuration"].tolist() == report.overall["configuration"].tolist()


def test_names_and_kinds_come_from_fields_not_from_run_names(runs):
    assert display("opi_0_5") == "OPI-0.5" and display("bertsim") == "BERTSim"
    renamed = {"Fusion | extractive | local-clf": runs["A-Two | extractive | local-clf"],
               "kNN | extractive | local-clf": runs["kNN | extractive | local-clf"]}
    report = build_report(configurations(renamed, {"Fusion | extractive | local-clf": "A-"}), RELATIONS, FAST)
    assert report.overall.set_index("configuration")["kind"]["Fusion | extractive | local-clf"] == "A-"
    assert "Combinations (the paper's Table 4)" in report.markdown()


def test_the_report_ranks_by_the_sweeps_beta(runs):
    report = build_report(configurations(runs, KINDS), RELATIONS, ReportSettings(FAST.config, beta=2.0))
    assert report.opi_name == "opi_2" and "Best by OPI-2" in report.headline()
    for row in report.overall.to_dict("records"):
        metrics, _ = summary(runs[row["configuration"]], RELATIONS, [2.0])
        assert row["opi_2"] == pytest.approx(metrics["opi_2"])


def test_a_configuration_without_judge_scores_gets_no_rank():
    runs = {"kNN | x | y": predictions(0.7, 0.6, seed=1).assign(judge_score=7.0),
            "BM25 | x | y": predictions(0.6, 0.6, seed=2).assign(judge_score=None)}
    table = build_report(configurations(runs, KINDS), RELATIONS, FAST).answer_quality.set_index("configuration")
    assert table.loc["kNN | x | y", "judge_mean_rank"] == 1 and pd.isna(table.loc["BM25 | x | y", "judge_mean_rank"])


def test_bounds_are_reference_points_and_every_configuration_is_placed_between_them(runs):
    swept = [Configuration("Random | x | y", "single", "Random", predictions(0.30, 0.10, seed=5), "lower"),
             Configuration("Oracle | x | y", "single", "Oracle", predictions(0.90, 0.90, seed=6), "upper"),
             *configurations({k: v.copy() for k, v in runs.items()}, KINDS)]
    for c in swept:
        c.predictions["predicted_relation_question_only"] = c.predictions["relation"].iloc[::-1].to_numpy()
    report = build_report(swept, RELATIONS, FAST)
    overall = report.overall.set_index("configuration")
    assert report.best["configuration"] != "Oracle | x | y"  # the oracle is above everything, and no contender
    assert overall.loc["Oracle | x | y", "kind"] == "bound" and overall.loc["Oracle | x | y", "verdict"] == "higher"
    assert overall.loc["Random | x | y", "gap_closed"] == 0 and overall.loc["Oracle | x | y", "gap_closed"] == 1
    low, high = overall.loc["Random | x | y", "opi_1"], overall.loc["Oracle | x | y", "opi_1"]
    for name in runs:  # the share of the gap, computed by hand from the three OPI-1 values
        assert overall.loc[name, "gap_closed"] == pytest.approx((overall.loc[name, "opi_1"] - low) / (high - low))
        assert overall.loc[name, "gap_closed_ci_low"] <= overall.loc[name, "gap_closed"] <= overall.loc[
            name, "gap_closed_ci_high"]
    flipped = swept[0].predictions
    assert overall.loc["Random | x | y", "lrcr_question_only"] == pytest.approx(
        (flipped["relation"] == flipped["predicted_relation_question_only"]).mean())
    assert "Bounds: Random | x | y" in report.headline() and "of the gap between them" in report.headline()


def test_the_report_tables_by_hand():
    ids, relation = ["e1", "e2", "e3", "e4"], ["deductive", "deductive", "fuzzy", "fuzzy"]
    x = pd.DataFrame({"id": ids, "relation": relation, "similarity": [0.9, 0.5, 0.6, 0.2],
                      "predicted_relation": ["deductive", "fuzzy", "fuzzy", "unknown"]})
    y = pd.DataFrame({"id": ids, "relation": relation, "similarity": [0.8, 0.8, 0.4, 0.4],
                      "predicted_relation": relation})
    report = build_report(configurations({"X": x, "Y": y}), RELATIONS, FAST)
    overall = report.overall.set_index("configuration")
    # X: B 0.55, L 0.5; per relation B 0.7 / 0.4, L 0.5 / 0.5 -> OPI-1 of (0.55, 0.5) = 0.5238
    # Y: B 0.6, L 1; per relation B 0.8 / 0.4, L 1 / 1 -> OPI-1 of (0.6, 1) = 0.75
    assert list(report.overall["configuration"]) == ["Y", "X"]
    assert overall.loc["X", ["bertsim", "lrcr", "opi_1"]].tolist() == pytest.approx([0.55, 0.5, 0.55 / 1.05])
    assert overall.loc["Y", ["bertsim", "lrcr", "opi_1"]].tolist() == pytest.approx([0.6, 1.0, 0.75])
    assert overall.loc["Y", "verdict"] == "best"
    table = report.relation_tables["opi_1"]
    assert list(table.index) == ["deductive", "fuzzy"]  # direct_matching has no examples: no row
    assert table.loc["deductive"].tolist() == pytest.approx([1.6 / 1.8, 0.7 / 1.2])  # Y 0.8889, X 0.5833
    assert table.loc["fuzzy"].tolist() == pytest.approx([0.8 / 1.4, 0.4 / 0.9])  # Y 0.5714, X 0.4444
    strengths = report.strengths.set_index("relation")
    assert strengths.loc["deductive", "best"] == "Y" and strengths.loc["deductive", "runner_up"] == "X"
    assert strengths.loc["deductive", "margin"] == pytest.approx(1.6 / 1.8 - 0.7 / 1.2)  # 0.3056
    assert list(report.answer_quality["configuration"]) == ["Y", "X"]  # by BERTSim: 0.6 > 0.55


def test_the_headline_says_the_retrieval_scope(runs):
    import dataclasses

    for scope, said in [("article", "Retrieval: within each example's own article (the paper's setting)."),
                        ("corpus", "Retrieval: across one index of every article of the dataset")]:
        report = build_report(configurations(runs), RELATIONS, dataclasses.replace(FAST, scope=scope))
        assert said in report.headline()


def test_a_report_without_relations_writes_no_empty_table(tmp_path):
    frame = prediction_rows(20, 0.5, 0.5, 0, RELATIONS).assign(relation=None)
    report = build_report([Configuration("a", "single", "a", frame), Configuration("b", "single", "b", frame)],
                          RELATIONS, FAST)
    report.write(tmp_path)
    written = {p.name for p in tmp_path.iterdir()}
    assert "overall.csv" in written and "strengths.csv" not in written and "per_relation.csv" not in written
    assert all(p.stat().st_size > 1 for p in tmp_path.iterdir())


def with_retrieval(frame: pd.DataFrame, quality: float, seed: int, ordered: bool = True) -> pd.DataFrame:
    """``frame`` with retrieval metrics around ``quality``, missing on every fifth example (no evidence)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    evidence = np.arange(len(frame)) % 5 != 0
    frame = frame.copy()
    names = ["recall_at_2", "recall_at_5", "recall_at_10", *(["ndcg_at_2", "ndcg_at_5", "mrr"] if ordered else [])]
    for name in names:
        values = np.clip(rng.normal(quality, 0.1, len(frame)), 0, 1)
        frame[name] = pd.array([v if e else None for v, e in zip(values, evidence)], dtype="Float64")
    return frame


@pytest.fixture(scope="module")
def retrieval_runs(runs):
    """An oracle (perfect, upper bound), kNN and A-Two alike, EDI far lower, and an S- union (recall only)."""
    def run(name: str) -> pd.DataFrame:
        return runs[f"{name} | extractive | local-clf"]

    return [Configuration("Oracle | x | y", "single", "Oracle", with_retrieval(predictions(0.9, 0.9, seed=6), 1.0, 10),
                          "upper"),
            Configuration("kNN | x | y", "single", "kNN", with_retrieval(run("kNN"), 0.7, 11)),
            Configuration("A-Two | x | y", "A-", "A-Two", with_retrieval(run("A-Two"), 0.7, 12)),
            Configuration("EDI | x | y", "single", "EDI", with_retrieval(run("EDI"), 0.2, 13)),
            Configuration("S-Two | x | y", "S-", "S-Two",
                          with_retrieval(predictions(0.7, 0.6, seed=7), 0.8, 14, ordered=False))]


def test_the_retrieval_table_tests_against_the_best_and_flags_the_oracle(retrieval_runs):
    report = build_report(retrieval_runs, RELATIONS, FAST)
    table = report.retrieval.set_index("configuration")
    assert "ndcg_at_5" in table and "ndcg_at_2" not in table  # the cut-off nearest 4
    assert {"mrr", "recall_at_2", "recall_at_5", "recall_at_10", "mrr_ci_low", "ndcg_at_5_ci_high"} <= set(table)
    knn = retrieval_runs[1].predictions
    assert table.loc["kNN | x | y", "ndcg_at_5"] == pytest.approx(knn["ndcg_at_5"].dropna().mean())
    assert table.loc["kNN | x | y", "n"] == 48  # 60 examples, every fifth without evidence
    oracle = table.loc["Oracle | x | y"]
    assert oracle["note"] == "perfect by construction" and pd.isna(oracle["ndcg_verdict"])
    assert oracle["ndcg_at_5"] > table["ndcg_at_5"].drop("Oracle | x | y").max()  # highest, and still not best
    assert sorted(table.loc[["kNN | x | y", "A-Two | x | y"], "ndcg_verdict"]) == ["best", "not distinguishable"]
    assert table.loc["EDI | x | y", "ndcg_verdict"] == "lower" and table.loc["EDI | x | y", "mrr_verdict"] == "lower"
    s_two = table.loc["S-Two | x | y"]
    assert pd.isna(s_two["ndcg_at_5"]) and pd.isna(s_two["mrr"]) and s_two["recall_at_5"] > 0.7
    assert s_two["note"] == "unordered: recall only" and pd.isna(s_two["ndcg_verdict"])
    best = table.index[table["ndcg_verdict"] == "best"][0]
    runner_up = ({"kNN | x | y", "A-Two | x | y"} - {best}).pop()
    headline = report.headline()
    sentence = headline.split(" Retrieval against the gold evidence")[1]
    assert f"best **{best}**" in sentence
    assert "significantly different from it: EDI | x | y;" in sentence
    assert f"not distinguishable: {runner_up};" in sentence
    assert "not compared: Oracle | x | y (perfect by construction), S-Two | x | y (unordered: recall only)." in sentence
    markdown = report.markdown()
    assert "## Retrieval against gold evidence" in markdown and "perfect by construction" in markdown
    assert "nDCG@5" in markdown and "recall@10" in markdown


def test_retrieval_is_written_only_where_the_runs_have_it(runs, retrieval_runs, tmp_path):
    plain = build_report(configurations(runs, KINDS), RELATIONS, FAST)
    assert plain.retrieval.empty and "Retrieval against" not in plain.headline() + plain.markdown()
    plain.write(tmp_path / "plain")
    assert not (tmp_path / "plain" / "retrieval.csv").exists()
    build_report(retrieval_runs, RELATIONS, FAST).write(tmp_path / "with")
    assert "Oracle | x | y" in pd.read_csv(tmp_path / "with" / "retrieval.csv")["configuration"].tolist()
    assert "Retrieval against gold evidence" in (tmp_path / "with" / "report.html").read_text()


def test_calibrated_lrcr_is_shown_beside_the_raw_and_ranks_its_section(runs, tmp_path):
    names = list(runs)  # kNN first on raw OPI-1, EDI last: people's labels put EDI first
    calibrated = {names[0]: (("labels_used", 40.0), ("lrcr_calibrated", 0.31), ("opi_1_calibrated", 0.40)),
                  names[2]: (("labels_used", 40.0), ("lrcr_calibrated", 0.52), ("opi_1_calibrated", 0.55))}
    report = build_report([Configuration(name, "single", name.split(" | ")[0], frame, None,
                                         calibrated.get(name, ())) for name, frame in runs.items()], RELATIONS)
    table = report.calibrated
    raw = report.overall.set_index("configuration")["opi_1"]
    assert raw[names[0]] > raw[names[2]]
    assert list(table["configuration"]) == [names[2], names[0]]  # by calibrated OPI-1, not by raw
    assert list(table["lrcr"]) == [report.overall.set_index("configuration").loc[n, "lrcr"] for n in table["configuration"]]
    assert "calibrated by people's labels" in report.markdown()
    assert (tmp_path / "calibrated.csv") in report.write(tmp_path)
    assert build_report(configurations(runs), RELATIONS).calibrated.empty  # none imported: no section
    assert "calibrated by people" not in build_report(configurations(runs), RELATIONS).markdown()
