"""What a sweep's run pages say in MLflow: each run's description (the ``mlflow.note.content`` tag, Markdown that
MLflow shows at the top of the run page). The parent's: the verdict and the ranking table with intervals; each
child's: one line saying how it placed ("2nd of 15 by OPI-1: 0.285 [0.244, 0.324]; not distinguishable from the best
(A-Four)")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from opi.metrics.names import BERTSIM, LRCR
from opi.report import display
from opi.report.tables import interval as with_interval, missing  # the report's cells: 0.285 [0.244, 0.324]

NOTE = "mlflow.note.content"
LONGEST = 8000  # MLflow's longest tag value
BOUNDS = {"lower": "the lower bound (random retrieval)", "upper": "the upper bound (oracle retrieval)"}


def shown_metric(metric: str) -> str:
    """opi_1 -> OPI-1, opi_1_calibrated -> calibrated OPI-1, bertsim -> BERTSim."""
    if metric.endswith("_calibrated"):
        return "calibrated " + display(metric.removesuffix("_calibrated"))
    return display(metric)


@dataclass(frozen=True)
class Placed:
    """One configuration in a sweep's ranking, as its description tells it."""
    run_id: str
    name: str
    value: float
    low: float | None = None
    high: float | None = None
    bound: str | None = None  # lower | upper: a reference point, not ranked
    verdict: str | None = None  # the report's, against the best: best | not distinguishable | lower | higher
    p_adjusted: float | None = None


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def against_best(placed: Placed, best: str | None) -> str:
    """How the report's paired test placed it against the best (nothing before the report has run)."""
    if placed.verdict is None or best is None:
        return ""
    if placed.verdict == "best":
        return "; the best"
    p = "" if missing(placed.p_adjusted) else f", adjusted p = {placed.p_adjusted:.3g}"
    if placed.verdict == "not distinguishable":
        return f"; not distinguishable from the best ({best}){p}"
    return f"; {placed.verdict} than the best ({best}){p}"


def placement_notes(ranking: Sequence[Placed], metric: str) -> dict[str, str]:
    """Run id -> its one line. ``ranking``: best first; the bounds are reference points, not ranked."""
    contenders = [p for p in ranking if p.bound is None]
    best = contenders[0].name if contenders else None
    notes = {p.run_id: f"{ordinal(place)} of {len(contenders)} by {shown_metric(metric)}: "
                       f"{with_interval(p.value, p.low, p.high)}{against_best(p, best)}"
             for place, p in enumerate(contenders, start=1)}
    notes.update({p.run_id: f"{BOUNDS.get(p.bound, p.bound)}, a reference point, not ranked; {shown_metric(metric)} "
                            f"{with_interval(p.value, p.low, p.high)}{against_best(p, best)}"
                  for p in ranking if p.bound is not None})
    return notes


def ranking_table(ranking: Sequence[Placed], metrics: dict[str, dict[str, tuple]], metric: str) -> str:
    """The ranking as a Markdown table: place, name and each metric with its interval (``metrics``: run id ->
    metric -> (value, low, high))."""
    contenders = [p for p in ranking if p.bound is None]
    places = {p.run_id: str(place) for place, p in enumerate(contenders, start=1)}
    shown = [metric, *(m for m in (BERTSIM, LRCR) if m != metric and any(m in v for v in metrics.values()))]
    rows = [{"#": places.get(p.run_id, f"({p.bound} bound)"), "configuration": p.name,
             **{shown_metric(m): with_interval(*metrics[p.run_id][m]) if m in metrics[p.run_id] else ""
                for m in shown}} for p in ranking]
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def fixed_line(fixed: dict[str, str]) -> str:
    """The parts every configuration shares, said once: "reader extractive, classifier local-clf"."""
    return ", ".join(f"{part} {value}" for part, value in fixed.items())


def limited(text: str) -> str:
    """A description within MLflow's longest tag value."""
    if len(text) <= LONGEST:
        return text
    cut = "\n\n(cut here: the whole is in the run's artifacts)"
    return text[:LONGEST - len(cut)] + cut
