"""Did tonight's run get worse than the baseline? One verdict per (configuration, metric).

A baseline is the metrics of each configuration and, when it is a run we can read, its per-example predictions.
- With predictions on both sides, each configuration is compared on the examples both runs share (by example id):
  the values, the change and a paired permutation test (``opi.metrics.stats.compare``, whole articles swapped at
  once under ``unit="article"``). Fewer shared examples than the baseline has is said in one line; fewer than
  ``min_overlap`` of the baseline's is refused (``NotComparable``): a champion measured on other data says nothing.
- The p-values of all the gate's verdicts are adjusted together (Benjamini-Hochberg, as the sweep report does), and
  the tolerance is the margin within which two runs count as equivalent: a **regression** is a drop larger than
  ``tolerance`` whose adjusted p is below ``alpha``. Improvements are judged the same way.
- Without predictions (a baseline file of numbers), a drop larger than ``tolerance`` is a regression, and the
  judgement says so.
A configuration the baseline has and tonight's run lacks is ``missing``, which fails the night like a regression; a
configuration new tonight is ``new`` and has no verdict.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from opi.data import DataError
from opi.metrics.names import BERTSIM, LRCR, OPI_1
from opi.metrics.stats import UNITS, Scorer, adjusted, compare, design
from opi.checks import require_number

GATED = (OPI_1, BERTSIM, LRCR)
TEST_METRIC = {OPI_1: "opi", BERTSIM: BERTSIM, LRCR: LRCR}
FAILING = ("regression", "missing")
TOLERANCE = 0.01  # the equivalence margin: a smaller change is never a regression or an improvement
ALPHA = 0.05  # the adjusted paired test's significance level
MIN_OVERLAP = 0.90  # the share of the baseline's examples tonight's run must have for a comparison
UNIT = "article"  # what the paired test swaps: whole articles, or single examples
COLUMNS = ["configuration", "metric", "baseline", "current", "change", "p_value", "p_adjusted", "verdict"]
Rows = Mapping[str, pd.DataFrame]


class NotComparable(Exception):
    """Tonight's run and the baseline share too few examples to be compared."""


@dataclass(frozen=True)
class GateSettings:
    tolerance: float = TOLERANCE
    alpha: float = ALPHA
    min_overlap: float = MIN_OVERLAP
    unit: str = UNIT
    permutations: int = 9999
    seed: int = 0

    def __post_init__(self):
        require_number("tolerance", self.tolerance, ge=0)  # the float settings' one range check (no NaN, no inf)
        require_number("alpha", self.alpha, gt=0, lt=1)
        require_number("min_overlap", self.min_overlap, gt=0, le=1)
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {self.unit!r}")


@dataclass(frozen=True)
class Overlap:
    """The examples tonight's run and the baseline have (by id), and those they share."""
    baseline: int
    tonight: int
    ids: frozenset

    @property
    def shared(self) -> int:
        return len(self.ids)

    def notice(self) -> str | None:
        if self.shared == self.baseline == self.tonight:
            return None
        return (f"comparing on the {self.shared} examples both runs share (baseline {self.baseline}, "
                f"tonight {self.tonight})")

    def check(self, min_overlap: float) -> None:
        if self.shared < min_overlap * self.baseline:
            raise NotComparable(
                f"tonight's run has {self.shared} of the baseline's {self.baseline} examples "
                f"({self.shared / max(self.baseline, 1):.0%}, tonight {self.tonight}), below min_overlap "
                f"{min_overlap:.0%}: compare with a baseline measured on this data (--baseline <parent run id>) "
                "or lower --min-overlap")


def overlap(tonight_ids, baseline_ids) -> Overlap:
    tonight, baseline = set(tonight_ids), set(baseline_ids)
    return Overlap(len(baseline), len(tonight), frozenset(tonight & baseline))


def ids_of(rows: Rows) -> set:
    """Every example id the configurations' rows hold."""
    return set().union(*(set(frame["id"]) for frame in rows.values())) if rows else set()


@dataclass(frozen=True)
class Judgement:
    """The verdict table (``COLUMNS``) and the lines that say how it was reached."""
    table: pd.DataFrame
    notes: tuple[str, ...]

    @property
    def failed(self) -> pd.DataFrame:
        return failed(self.table)


def judge(current: Mapping[str, Mapping[str, float]], baseline: Mapping[str, Mapping[str, float]],
          current_rows: Rows | None = None, baseline_rows: Rows | None = None,
          settings: GateSettings = GateSettings()) -> Judgement:
    """Every configuration x gated metric judged; raises ``NotComparable`` below ``settings.min_overlap``."""
    paired = current_rows is not None and baseline_rows is not None
    shared = overlap(ids_of(current_rows), ids_of(baseline_rows)) if paired else None
    if shared is not None:
        shared.check(settings.min_overlap)
    records, unpaired, partial = [], [], {}
    for configuration in sorted(set(baseline) | set(current)):
        pair = _pair(configuration, current_rows, baseline_rows, shared)
        if pair is None and paired and configuration in baseline and configuration in current:
            unpaired.append(configuration)
        elif pair is not None and len(pair[0]) < shared.shared:
            partial[configuration] = len(pair[0])
        records += [_record(configuration, metric, current, baseline, pair, settings) for metric in GATED]
    table = _adjusted(pd.DataFrame.from_records(records, columns=COLUMNS), settings)
    notes = _notes(table, shared, unpaired, current_rows, settings)
    return Judgement(table, notes + tuple(
        f"{name}: judged on the {n} of the {shared.shared} shared examples that both its runs have (a raced "
        "configuration eliminated early ran fewer)" for name, n in partial.items()))


def _pair(configuration: str, current_rows: Rows | None, baseline_rows: Rows | None, shared: Overlap | None
          ) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The configuration's rows tonight and in the baseline, on the shared examples both of its runs have (None
    unless both exist and have some): a configuration a race eliminated ran only its first rounds."""
    if shared is None or configuration not in current_rows or configuration not in baseline_rows:
        return None
    ids = shared.ids & set(current_rows[configuration]["id"]) & set(baseline_rows[configuration]["id"])
    if not ids:
        return None
    return tuple(rows[configuration][rows[configuration]["id"].isin(ids)].reset_index(drop=True)
                 for rows in (current_rows, baseline_rows))


def _record(configuration: str, metric: str, current, baseline, pair, settings: GateSettings) -> dict:
    before, after = baseline.get(configuration, {}).get(metric), current.get(configuration, {}).get(metric)
    record = {"configuration": configuration, "metric": metric, "baseline": before, "current": after,
              "change": None, "p_value": None, "p_adjusted": None, "verdict": "new" if before is None else "missing"}
    if before is None or after is None:
        return record
    if pair is not None:  # the values and the test on the shared examples
        name = TEST_METRIC[metric]
        before, after = value(pair[1], name), value(pair[0], name)
        record["p_value"] = compare(*pair, name, 1.0, settings.alpha, settings.permutations, settings.seed,
                                    unit=settings.unit).p_value
    return {**record, "baseline": before, "current": after, "change": after - before, "verdict": None}


def value(rows: pd.DataFrame, metric: str) -> float:
    """``metric`` (bertsim, lrcr, opi: OPI-1) of a configuration's rows, as its run computed it."""
    scorer = Scorer(rows)
    return float(scorer(scorer.ones, metric))


def _adjusted(table: pd.DataFrame, settings: GateSettings) -> pd.DataFrame:
    """Benjamini-Hochberg over every tested verdict, then each open verdict decided."""
    tested = table["p_value"].notna()
    table["p_adjusted"] = table["p_adjusted"].astype(object)
    if tested.any():
        table.loc[tested, "p_adjusted"] = adjusted(table.loc[tested, "p_value"].astype(float).tolist())
    open_ = table["verdict"].isna()
    table.loc[open_, "verdict"] = [_verdict(change, p, settings) for change, p in
                                   zip(table.loc[open_, "change"], table.loc[open_, "p_adjusted"])]
    return table


def _verdict(change: float, p_adjusted: float | None, settings: GateSettings) -> str:
    real = p_adjusted is None or pd.isna(p_adjusted) or p_adjusted < settings.alpha
    if change < -settings.tolerance and real:
        return "regression"
    if change > settings.tolerance and real:
        return "improved"
    return "ok"


def _notes(table: pd.DataFrame, shared: Overlap | None, unpaired: list[str], current_rows: Rows | None,
           settings: GateSettings) -> tuple[str, ...]:
    """One line each: how the verdicts were reached."""
    if shared is None:
        return (f"the baseline has numbers only (no per-example predictions): a change larger than the tolerance "
                f"({settings.tolerance}) decides each verdict, without a paired test",)
    notes = [shared.notice()]
    tested = int(table["p_value"].notna().sum())
    first = next((rows for rows in current_rows.values() if len(rows)), None)
    if tested and first is not None:
        shown = design(first[first["id"].isin(shared.ids)], settings.unit)
        missing = " (tonight's predictions name no article)" if settings.unit != shown.unit else ""
        notes += [f"paired permutation tests by {shown.unit}{missing}: {shown.describe()}; the {tested} p-values "
                  f"Benjamini-Hochberg adjusted together; a regression is a drop larger than {settings.tolerance} "
                  f"at adjusted p < {settings.alpha}", shown.warning]
    notes += [f"{name}: no per-example predictions of the same examples on both sides: judged by the tolerance alone"
              for name in unpaired]
    return tuple(note for note in notes if note)


def failed(verdicts: pd.DataFrame) -> pd.DataFrame:
    return verdicts[verdicts["verdict"].isin(FAILING)]


def explain(verdicts: pd.DataFrame) -> str:
    """One line per failing verdict: what fell, from what to what, and how sure we are."""
    lines = []
    for row in failed(verdicts).itertuples(index=False):
        if row.verdict == "missing":
            lines.append(f"{row.configuration}: no {row.metric} tonight (the baseline has {row.baseline:.4f})")
        else:
            evidence = "" if pd.isna(row.p_value) else f", p = {row.p_value:.4f}, adjusted {row.p_adjusted:.4f}"
            lines.append(f"{row.configuration}: {row.metric} fell {-row.change:.4f} "
                         f"({row.baseline:.4f} -> {row.current:.4f}{evidence})")
    return "\n".join(lines)


VERDICTS = ("Verdicts: regression = fell by more than the tolerance, and the adjusted paired test says it is not "
            "noise; improved = the same, upwards; ok = neither; missing = no result tonight (fails the night); new = "
            "not in the baseline.")


def markdown(judgement: Judgement, header: Sequence[str], labels: Mapping[str, str] | None = None) -> str:
    """The verdicts as Markdown that renders in MLflow's preview: ``header`` lines, then the table, configurations
    by ``labels`` (short names) where given, a ``|`` in a cell escaped."""
    table = judgement.table.assign(configuration=judgement.table["configuration"].map(
        lambda name: (labels or {}).get(name, name)))
    cells = table.map(lambda v: v.replace("|", r"\|") if isinstance(v, str) else v)
    notes = [note[:1].upper() + note[1:] + "." for note in judgement.notes]
    return "\n\n".join([*header, *notes, VERDICTS, cells.to_markdown(index=False, floatfmt=".4f")]) + "\n"


def read_baseline_file(path: str | Path) -> dict[str, dict[str, float]]:
    """A committed baseline: {"configurations": {name: {"opi_1": .., "bertsim": .., "lrcr": ..}}, ...}."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise DataError(f"baseline file {path} does not exist") from None
    except json.JSONDecodeError as err:
        raise DataError(f"baseline file {path} is not JSON: {err}") from None
    configurations = data.get("configurations") if isinstance(data, dict) else None
    if not isinstance(configurations, dict) or not configurations:
        raise DataError(f"baseline file {path}: expected a non-empty 'configurations' object")
    for name, metrics in configurations.items():
        for metric in GATED:
            value = metrics.get(metric) if isinstance(metrics, dict) else None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise DataError(f"baseline file {path}, configuration {name!r}, field {metric!r}: "
                                f"a number is required, got {value!r}")
    return {name: {m: float(metrics[m]) for m in GATED} for name, metrics in configurations.items()}


def baseline_file_yardstick(path: str | Path) -> dict[str, str]:
    """The yardstick tags a baseline file records (none for a file written before they were)."""
    data = json.loads(Path(path).read_text())
    found = data.get("yardstick") if isinstance(data, dict) else None
    return {k: str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def write_baseline_file(path: str | Path, metrics: Mapping[str, Mapping[str, float]], source: str,
                        yardstick: Mapping[str, str] | None = None) -> Path:
    data = {"source": source, **({"yardstick": dict(yardstick)} if yardstick else {}),
            "configurations": {name: {m: float(values[m]) for m in GATED} for name, values in sorted(metrics.items())}}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=2) + "\n")
    return Path(path)
