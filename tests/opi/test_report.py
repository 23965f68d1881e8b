import base64
import re

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
    runner_up = report.labels[report.overall["configuration"].iloc[1]]
    assert f"Not distinguishable from it: {runner_up}; lower: EDI." in headline
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
    for name in ("bars.png", "heatmap.png"):  # embedded: the page renders alone, as MLflow's artifact viewer serves it
        assert f'src="data:image/png;base64,{base64.b64encode((tmp_path / name).read_bytes()).decode()}"' in html
    assert 'src="bars.png"' not in html and "<table" in html and ">A-Two<" in html
    markdown = (tmp_path / "report.md").read_text()
    assert "Combinations (the paper's Table 4)" in markdown and "![Metrics with intervals](bars.png)" in markdown
    overall = pd.read_csv(tmp_path / "overall.csv")
    assert overall["configuration"].tolist() == report.overall["configuration"].tolist()  # the names given
    assert overall.set_index("configuration")["short_name"]["A-Two | extractive | local-clf"] == "A-Two"


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
    best = report.best
    name = report.labels
    assert (f"Bounds: {name['Random | x | y']} {low:.3f}, {name['Oracle | x | y']} {high:.3f}; "
            f"{name[best['configuration']]} closes "
            f"{best['gap_closed']:.0%} [{best['gap_closed_ci_low']:.0%}, {best['gap_closed_ci_high']:.0%}] of the gap."
            in report.headline())
    sections = section_tables(report.markdown())
    for title in ("Ranking", "Strengths and weaknesses: best configuration per relation",
                  "Single retrievers (the paper's Table 2)", "Combinations (the paper's Table 4)",
                  "OPI-1 per relation", "Answer quality ranking (the paper's Table 3)"):
        assert "Random" not in sections[title] and "Oracle" not in sections[title], title
    assert "| Random · x · y | lower bound |" in sections["Bounds"]
    assert "| Oracle · x · y | upper bound |" in sections["Bounds"]
    assert not set(report.strengths["best"]) & {"Random | x | y", "Oracle | x | y"}
    assert not set(report.strengths["runner_up"]) & {"Random | x | y", "Oracle | x | y"}


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


def test_the_report_says_the_retrieval_scope(runs):
    import dataclasses

    for scope, said in [("article", "Retrieval: within each example's own article (the paper's setting)."),
                        ("corpus", "Retrieval: across one index of every article of the dataset")]:
        report = build_report(configurations(runs), RELATIONS, dataclasses.replace(FAST, scope=scope))
        assert said in report.markdown() and said not in report.headline()  # a note, not the verdict
        assert f"retrieval: {'own article' if scope == 'article' else 'whole corpus'}" in report.markdown()


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
    line = next(line for line in report.verdict() if line.startswith("Retrieval"))
    value = table.loc[best, ["ndcg_at_5", "ndcg_at_5_ci_low", "ndcg_at_5_ci_high"]].tolist()
    interval = f"{value[0]:.3f} [{value[1]:.3f}, {value[2]:.3f}]"
    assert line == (f"Retrieval by nDCG@5: best {best.split(' | ')[0]}, {interval}."
                    f" Not distinguishable from it: {runner_up.split(' | ')[0]}; lower: EDI.")
    shown = section_tables(report.markdown())["Retrieval against gold evidence"]
    oracle_row = next(row for row in shown.splitlines() if row.startswith("| Oracle |"))
    assert oracle_row.endswith("| perfect by construction |") and "0." not in oracle_row  # no number contradicts it
    assert "| S-Two |" in shown and "unordered: recall only" in shown
    assert "nDCG@5" in shown and "recall@10" in shown


def test_retrieval_is_written_only_where_the_runs_have_it(runs, retrieval_runs, tmp_path):
    plain = build_report(configurations(runs, KINDS), RELATIONS, FAST)
    assert plain.retrieval.empty and "Retrieval against" not in plain.markdown()
    plain.write(tmp_path / "plain")
    assert not (tmp_path / "plain" / "retrieval.csv").exists()
    build_report(retrieval_runs, RELATIONS, FAST).write(tmp_path / "with")
    assert "Oracle | x | y" in pd.read_csv(tmp_path / "with" / "retrieval.csv")["configuration"].tolist()
    assert "Retrieval against gold evidence" in (tmp_path / "with" / "report.html").read_text()
    assert "Retrieval by" not in plain.headline()


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
    raw_lrcr = report.overall.set_index("configuration")["lrcr"]
    assert list(table["lrcr"]) == [raw_lrcr[n] for n in table["configuration"]]
    assert "calibrated by people's labels" in report.markdown()
    assert (tmp_path / "calibrated.csv") in report.write(tmp_path)
    assert build_report(configurations(runs), RELATIONS).calibrated.empty  # none imported: no section
    assert "calibrated by people" not in build_report(configurations(runs), RELATIONS).markdown()


def section_tables(markdown: str) -> dict[str, str]:
    """Each ``## title`` of a Markdown report and the table lines under it."""
    sections = {}
    for part in markdown.split("\n## ")[1:]:
        title, _, body = part.partition("\n")
        sections[title] = "\n".join(line for line in body.splitlines() if line.startswith("|"))
    return sections


def unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def assert_tables_keep_their_columns(markdown: str) -> int:
    """Every row of every Markdown table has as many unescaped ``|`` as its header (MLflow's preview then keeps
    each number under its header); returns how many tables were checked."""
    tables = [[line for line in block.splitlines() if line.startswith("|")] for block in markdown.split("\n\n")]
    checked = 0
    for lines in (t for t in tables if t):
        header = unescaped_pipes(lines[0])
        assert all(unescaped_pipes(line) == header for line in lines), lines
        checked += 1
    return checked


@pytest.fixture(scope="module")
def grid_report():
    from tests.opi.report.sweep import RELATIONS, grid

    return build_report(grid(), RELATIONS, ReportSettings(ReportConfig(resamples=300, permutations=499),
                                                           gold_source="classifier", scope="article"))


def test_the_verdict_of_the_readme_grid_is_a_few_short_lines(grid_report):
    verdict = grid_report.verdict()
    words = len(" ".join(verdict).split())
    assert words <= 80, (words, verdict)
    best = grid_report.best
    assert verdict[0].startswith(f"Best by OPI-1: **{best['configuration'].split(' | ')[0]}**, "
                                 f"{best['opi_1']:.3f} [{best['opi_1_ci_low']:.3f}, {best['opi_1_ci_high']:.3f}].")
    assert [line.split(":")[0] for line in verdict[1:]] == ["BERTSim", "LRCR", "Bounds", "Retrieval by nDCG@4"]
    assert "extractive" not in " ".join(verdict) and "|" not in " ".join(verdict)


def test_the_header_says_the_shared_parts_once_and_the_unit_with_its_clusters(grid_report):
    markdown = grid_report.markdown()
    shared = "reader: extractive · classifier: local-clf · retrieval: own article"
    assert f"13 configurations and 2 bounds · {shared}\n" in markdown
    assert "Inference by article: 52 articles, 416 questions" in markdown
    assert markdown.count("extractive") == 1 and "Warning" not in markdown


def test_few_articles_get_a_one_line_warning_and_unit_example_is_said():
    from tests.opi.report.sweep import RELATIONS, grid

    few = grid(articles=6, per_article=20, full_names=False)[:3]
    report = build_report(few, RELATIONS, FAST)
    assert "Inference by article: 6 articles, 120 questions" in report.markdown()
    assert ("**Warning**: only 6 articles: intervals and tests by article mean little with fewer than 10."
            in report.markdown())
    by_example = build_report(few, RELATIONS, ReportSettings(ReportConfig(resamples=400, permutations=999,
                                                                          unit="example")))
    assert "Inference by question: 120 questions, each its own unit" in by_example.markdown()
    assert "Warning" not in by_example.markdown()


def test_every_statistic_is_by_the_reports_unit():
    """Each p-value and interval of the report equals opi.metrics.stats' own at the report's unit (and the units
    give different numbers on clustered data)."""
    from opi.metrics import stats
    from tests.opi.report.sweep import RELATIONS, grid

    swept = grid(articles=12, per_article=8, full_names=False)
    reports = {unit: build_report(swept, RELATIONS, ReportSettings(ReportConfig(resamples=200, permutations=199,
                                                                                unit=unit)))
               for unit in ("article", "example")}
    rows = {c.name: c.predictions for c in swept}
    for unit, report in reports.items():
        s = report.settings.config
        overall = report.overall.set_index("configuration")
        best, other = report.best["configuration"], "EDI"
        assert overall.loc[other, "p_vs_best"] == stats.compare(rows[best], rows[other], "opi", 1.0, s.alpha,
                                                                s.permutations, 0, unit).p_value
        closed = stats.gap_closed(rows[other], rows["Random"], rows["Oracle"], "opi", 1.0, s.confidence, s.resamples,
                                  0, unit)
        assert overall.loc[other, ["gap_closed_ci_low", "gap_closed_ci_high"]].tolist() == [closed.low, closed.high]
        retrieval = report.retrieval.set_index("configuration")
        ranked_best = retrieval.index[retrieval["ndcg_verdict"] == "best"][0]
        assert retrieval.loc[other, "mrr_p_value"] == stats.compare_column(
            rows[ranked_best], rows[other], "mrr", s.alpha, s.permutations, 0, unit).p_value
        strongest = report.strengths.iloc[0]
        of = [rows[c][rows[c]["relation"] == strongest["relation"]]
              for c in (strongest["best"], strongest["runner_up"])]
        assert strongest["p_value"] == stats.compare(*of, "opi", 1.0, s.alpha, s.permutations, 0, unit).p_value
    by_article, by_example = (r.overall.set_index("configuration") for r in reports.values())
    assert (by_article["opi_1_ci_high"] - by_article["opi_1_ci_low"]).mean() > (
        by_example["opi_1_ci_high"] - by_example["opi_1_ci_low"]).mean()  # clusters: wider intervals


def test_markdown_tables_keep_every_number_under_its_header(tmp_path):
    """A relation label and a configuration name holding '|': escaped, so no row gains a column."""
    runs = {"kNN | extractive | local-clf": predictions(0.7, 0.6, seed=1),
            "a|b": predictions(0.5, 0.4, seed=2)}
    for frame in runs.values():
        frame["relation"] = frame["relation"].replace("fuzzy", "fuzzy|vague")
    report = build_report(configurations(runs), ["direct_matching", "deductive", "fuzzy|vague"], FAST)
    markdown = report.markdown()
    assert "fuzzy\\|vague" in markdown and assert_tables_keep_their_columns(markdown) == 7
    assert assert_tables_keep_their_columns(report.summary_markdown()) == 1


def test_the_readme_grids_tables_keep_their_columns_and_show_no_nan(grid_report, tmp_path):
    grid_report.write(tmp_path)
    markdown, html = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    assert assert_tables_keep_their_columns(markdown) >= 10
    for text in (markdown, html, grid_report.summary_markdown()):
        assert not re.search(r"\bnan\b|<NA>", text, re.IGNORECASE)
    ranking = section_tables(markdown)["Ranking"].splitlines()
    assert ranking[0] == "| # | configuration | OPI-1 | BERTSim | LRCR | p (adj.) | vs best | gap closed |"
    assert ranking[2].startswith(f"| 1 | {grid_report.labels[grid_report.best['configuration']]} | ")
    assert "| — | best |" in ranking[2]  # the best has no p against itself


def test_the_summary_is_the_verdict_and_the_ranking_with_intervals(grid_report):
    summary = grid_report.summary_markdown()
    verdict = grid_report.verdict()
    assert verdict[0] in summary and all(f"- {line}" in summary for line in verdict[1:])
    table = [line for line in summary.splitlines() if line.startswith("|")]
    assert table[0] == "| # | configuration | OPI-1 | p (adj.) | vs best | gap closed |"
    assert len(table) == 2 + 13 and re.search(r"\| \d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\] \|", table[2])
    assert "Inference by article: 52 articles, 416 questions" in summary


def test_names_the_caller_gives_are_kept_with_its_fixed_parts():
    import dataclasses

    from tests.opi.report.sweep import RELATIONS, grid

    given = grid(articles=12, full_names=False)[:3]
    report = build_report(given, RELATIONS, dataclasses.replace(FAST, fixed=(("reader", "gpt-4o"), ("data", "mine"))))
    assert report.labels == {"DPS": "DPS", "kNN": "kNN", "BM25": "BM25"}
    assert "3 configurations · reader: gpt-4o · data: mine" in report.markdown()
