import numpy as np
import pandas as pd
import pytest

from opi.report import plots


def overall() -> pd.DataFrame:
    return pd.DataFrame({"configuration": ["a", "b", "Random", "Oracle"], "kind": ["single", "A-", "bound", "bound"],
                         "bound": [None, None, "lower", "upper"], "opi_1": [0.30, 0.20, 0.06, 0.48],
                         "opi_1_ci_low": [0.25, 0.12, 0.03, 0.44], "opi_1_ci_high": [0.35, 0.26, 0.09, 0.52]})


def test_an_axis_spans_the_data_with_a_margin():
    assert plots.span(np.array([0.06, 0.48, np.nan])) == pytest.approx((0.06 - 0.0336, 0.48 + 0.0336))
    assert plots.span(np.array([0.5, 0.5])) == pytest.approx((0.49, 0.51))
    assert plots.span(np.array([np.nan])) == (0.0, 1.0)


def test_the_intervals_figure_is_scaled_to_the_contenders_intervals_and_the_bounds():
    fig = plots.intervals_figure(overall(), {}, ["opi_1"], 0.95)
    (ax,) = fig.axes
    assert ax.get_xlim() == pytest.approx(plots.span(np.array([0.12, 0.35, 0.06, 0.48])))  # not 0-1
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]  # the bounds are lines, not rows
    assert len(ax.lines) >= 2 and ax.get_title() == "OPI-1 (95% interval)"


def test_the_heatmaps_colours_run_from_the_tables_minimum_to_its_maximum():
    table = pd.DataFrame({"a": [0.06, 0.30], "b": [0.48, np.nan]}, index=["deductive", "fuzzy"])
    fig = plots.heatmap_figure(table, {"a": "A"}, "opi_1")
    image = fig.axes[0].images[0]
    assert image.get_clim() == pytest.approx((0.06, 0.48))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["A", "b"]
    assert plots.heatmap(table, {}, "opi_1")[:8] == b"\x89PNG\r\n\x1a\n"
