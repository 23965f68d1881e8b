import base64
import dataclasses

import numpy as np
import pandas as pd

from opi.metrics.stats import Design
from opi.report import ReportSettings, SweepReport, render
from opi.schemas import ReportConfig


def hand_report(contenders: int = 3, bounds: bool = True) -> SweepReport:
    """A report whose numbers are written by hand: kNN best, A-Two tied with it, the rest lower."""
    names = ["kNN", "A-Two", "EDI", "BM25", "SVM", "MMR", "DPS"][:contenders]
    verdicts = ["best", "not distinguishable", *["lower"] * (contenders - 2)][:contenders]
    values = [0.4, 0.38, 0.2, 0.19, 0.18, 0.17, 0.16][:contenders]
    rows = [{"configuration": n, "kind": "single", "bound": None, "verdict": v, "opi_1": x, "opi_1_ci_low": x - 0.05,
             "opi_1_ci_high": x + 0.05, "bertsim": 0.5 + (i == 1) * 0.1, "bertsim_ci_low": 0.45,
             "bertsim_ci_high": 0.6 + (i == 1) * 0.1, "p_adjusted": np.nan if v == "best" else 0.01}
            for i, (n, v, x) in enumerate(zip(names, verdicts, values))]
    if bounds:
        rows += [{"configuration": n, "kind": "bound", "bound": b, "verdict": v, "opi_1": x, "opi_1_ci_low": x,
                  "opi_1_ci_high": x, "bertsim": x, "bertsim_ci_low": x, "bertsim_ci_high": x, "p_adjusted": 0.001}
                 for n, b, v, x in (("Oracle", "upper", "higher", 0.6), ("Random", "lower", "lower", 0.1))]
    overall = pd.DataFrame(rows)
    if bounds:
        overall = overall.assign(gap_closed=(overall["opi_1"] - 0.1) / 0.5, gap_closed_ci_low=0.5,
                                 gap_closed_ci_high=0.7, p_upper_vs_lower_bound=0.0001)
    settings = ReportSettings(ReportConfig(), fixed=(("reader", "extractive"),))
    return SweepReport(overall, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), settings,
                       {n: n for n in overall["configuration"]}, "opi_1", design=Design("article", 52, 416, False))


def test_the_verdict_by_hand():
    report = hand_report()
    assert render.verdict(report) == [
        "Best by OPI-1: **kNN**, 0.400 [0.350, 0.450]. Not distinguishable from it: A-Two; lower: EDI.",
        "BERTSim: best A-Two, 0.600 [0.450, 0.700].",
        "Bounds: Random 0.100, Oracle 0.600; kNN closes 60% [50%, 70%] of the gap."]


def test_many_configurations_are_counted_not_named():
    report = hand_report(contenders=7, bounds=False)
    assert render.decision(report) == ("Best by OPI-1: **kNN**, 0.400 [0.350, 0.450]. Not distinguishable from it: "
                                       "A-Two; lower: 5 configurations.")
    alone = hand_report(contenders=1, bounds=False)
    assert render.decision(alone).endswith("It is the only configuration.")


def test_the_metric_lines_name_the_best_contender_of_each():
    report = hand_report()
    assert render.metric_line(report, "bertsim") == "BERTSim: best A-Two, 0.600 [0.450, 0.700]."  # not the oracle


def test_the_header_says_what_is_shared_and_the_unit():
    assert render.header(hand_report()) == [
        "3 configurations and 2 bounds · reader: extractive",
        "Inference by article: 52 articles, 416 questions · 95% bootstrap intervals · paired permutation tests, "
        "Benjamini-Hochberg adjusted, α = 0.05"]
    few = hand_report()
    few.design = Design("article", 6, 48, False)
    assert render.header(few)[-1] == ("**Warning**: only 6 articles: intervals and tests by article mean little "
                                      "with fewer than 10.")


def test_the_html_page_embeds_its_figures():
    image = b"\x89PNG-bars"
    page = render.html_page(hand_report(), {"bars.png": image})
    assert f'src="data:image/png;base64,{base64.b64encode(image).decode()}"' in page
    assert "<strong>kNN</strong>" in page and "src=\"bars.png\"" not in page
    assert page.index("<h2>Bounds</h2>") < page.index("data:image/png") < page.index("</body>")


def test_the_summary_holds_the_verdict_and_the_compact_ranking():
    summary = hand_report().summary_markdown()
    table = [line for line in summary.splitlines() if line.startswith("|")]
    assert table[0] == "| # | configuration | OPI-1 | p (adj.) | vs best | gap closed |"
    assert table[2] == "| 1 | kNN | 0.400 [0.350, 0.450] | — | best | 60% [50%, 70%] |"
    assert len(table) == 5 and "Oracle" not in "\n".join(table)  # the contenders; the bounds are in the verdict
    assert summary.startswith("Best by OPI-1: **kNN**")  # the verdict first: MLflow folds the rest
    assert "3 configurations and 2 bounds · reader: extractive\n\nInference by article" in summary


def test_a_sweep_where_nothing_is_distinguishable_says_so_in_few_words():
    report = hand_report(contenders=7, bounds=False)
    report.overall.loc[report.overall["verdict"] == "lower", "verdict"] = "not distinguishable"
    assert render.decision(report).endswith(" Not distinguishable from it: every other configuration.")
    report = hand_report(contenders=3, bounds=False)
    report.overall.loc[report.overall["verdict"] == "lower", "verdict"] = "not distinguishable"
    assert render.decision(report).endswith(" Not distinguishable from it: A-Two, EDI.")


def test_a_tie_for_the_best_is_said_not_broken_by_order():
    report = hand_report(contenders=3, bounds=False)
    report.overall["bertsim"] = 0.5  # all three tied
    report.overall.loc[1, "opi_1"] = 0.4  # A-Two as good as kNN
    assert render.metric_line(report, "bertsim") == "BERTSim: best kNN, A-Two, EDI (tied), 0.500 [0.450, 0.600]."
    assert render.decision(report).startswith("Best by OPI-1: **kNN**, tied with A-Two, 0.400 [0.350, 0.450].")


def test_one_configuration_is_counted_in_the_singular_and_a_race_s_last_is_said_to_be():
    alone = hand_report(contenders=1, bounds=False)
    assert render.header(alone)[0] == "1 configuration · reader: extractive"
    alone.settings = dataclasses.replace(alone.settings, raced="a race in which 1 of 3 survived")
    assert render.decision(alone).endswith("It is the only configuration the race left.")
