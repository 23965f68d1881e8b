"""The report's figures as PNG bytes (written beside the report and embedded in its HTML as data URIs).

- ``intervals``: each headline metric per configuration as a point with its interval (a forest plot: the axis
  spans the data, so no bar's length would mislead), the random and oracle bounds as dashed reference lines.
- ``heatmap``: relation x configuration, the colour scale from the table's minimum to its maximum.
"""
from __future__ import annotations

import io
from typing import Sequence

import numpy as np
import pandas as pd

from opi.report.base import display

DPI = 110


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    _pyplot().close(fig)
    return buffer.getvalue()


def span(values: np.ndarray, margin: float = 0.08) -> tuple[float, float]:
    """An axis range around ``values`` (NaN left out) with a margin of the range on each side."""
    values = values[~np.isnan(values)]
    if not len(values):
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    pad = max((high - low) * margin, 0.01)
    return low - pad, high + pad


def intervals(overall: pd.DataFrame, labels: dict[str, str], metrics: Sequence[str], confidence: float) -> bytes:
    return png(intervals_figure(overall, labels, metrics, confidence))


def heatmap(table: pd.DataFrame, labels: dict[str, str], metric: str) -> bytes:
    return png(heatmap_figure(table, labels, metric))


def intervals_figure(overall: pd.DataFrame, labels: dict[str, str], metrics: Sequence[str], confidence: float):
    """One panel per metric: the contenders (best first, top to bottom) with their intervals; the bounds as
    dashed vertical lines."""
    plt = _pyplot()
    contenders = overall[overall["kind"] != "bound"]
    bound_rows = overall[overall["kind"] == "bound"]
    names = [labels.get(c, c) for c in contenders["configuration"]]
    positions = np.arange(len(names))[::-1]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.6 * len(metrics) + 1.2, 0.8 + 0.3 * len(names)),
                             sharey=True, squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        values = contenders[metric].to_numpy(dtype=float)
        low, high = (contenders[f"{metric}_ci_{side}"].to_numpy(dtype=float) for side in ("low", "high"))
        ax.errorbar(values, positions, xerr=np.vstack([values - low, high - values]), fmt="o", color="#4c72b0",
                    ecolor="#8fa8d0", capsize=3, markersize=4)
        shown = [values, low, high]
        for _, row in bound_rows.iterrows():
            ax.axvline(row[metric], color="#c44e52" if row["bound"] == "lower" else "#55a868", linestyle="--",
                       linewidth=1)
            ax.annotate(labels.get(row["configuration"], row["configuration"]), (row[metric], 1.0),
                        xycoords=("data", "axes fraction"), fontsize=7, ha="center", va="bottom")
            shown.append(np.array([row[metric]], dtype=float))
        ax.set_xlim(*span(np.concatenate(shown)))
        ax.set_title(f"{display(metric)} ({confidence:.0%} interval)", fontsize=9, pad=14)
        ax.grid(axis="x", color="#eee")
        ax.tick_params(labelsize=8)
    axes[0][0].set_yticks(positions, names)
    fig.tight_layout()
    return fig


def heatmap_figure(table: pd.DataFrame, labels: dict[str, str], metric: str):
    """relation x configuration, colours from the table's minimum to its maximum, each cell's value written."""
    plt = _pyplot()
    values = table.to_numpy(dtype=float)
    short = [labels.get(c, c) for c in table.columns]
    low, high = (np.nanmin(values), np.nanmax(values)) if np.isfinite(values).any() else (0.0, 1.0)
    high = high if high > low else low + 1e-9
    fig, ax = plt.subplots(figsize=(2.2 + 0.62 * len(short), 1.2 + 0.34 * len(table)))
    image = ax.imshow(values, cmap="viridis", vmin=low, vmax=high, aspect="auto")
    ax.set_xticks(range(len(short)), short, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(table)), table.index, fontsize=8)
    for (i, j), value in np.ndenumerate(values):
        if not np.isnan(value):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if (value - low) / (high - low) < 0.6 else "black")
    fig.colorbar(image, ax=ax, label=display(metric))
    ax.set_title(f"{display(metric)} per relation (colours from {low:.2f} to {high:.2f})", fontsize=9)
    fig.tight_layout()
    return fig
