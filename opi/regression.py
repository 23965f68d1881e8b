"""Did tonight's run get worse than the baseline? One verdict per (configuration, metric).

A baseline is the metrics of each configuration, and, when it is a run we can read, its per-example predictions.
- With predictions on both sides (the same examples), a drop is a **regression** only if it is larger than
  ``tolerance`` *and* the paired permutation test (``opi.metrics.stats.compare``) says it is not noise (p < alpha).
- Without them (a baseline file of numbers), a drop larger than ``tolerance`` is a regression.
Improvements are judged the same way. A configuration the baseline has and tonight's run lacks is ``missing``,
which fails the night like a regression; a configuration new tonight is ``new`` and has no verdict.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping

import pandas as pd

from opi.data import DataError
from opi.metrics.stats import compare

GATED = ("opi_1", "bertsim", "lrcr")
TEST_METRIC = {"opi_1": "opi", "bertsim": "bertsim", "lrcr": "lrcr"}
FAILING = ("regression", "missing")
TOLERANCE = 0.01  # the smallest drop that can be a regression
ALPHA = 0.05  # the paired test's significance level


def judge(current: Mapping[str, Mapping[str, float]], baseline: Mapping[str, Mapping[str, float]],
          current_rows: Mapping[str, pd.DataFrame] | None = None,
          baseline_rows: Mapping[str, pd.DataFrame] | None = None,
          tolerance: float = TOLERANCE, alpha: float = ALPHA, permutations: int = 9999, seed: int = 0) -> pd.DataFrame:
    """The verdict table: configuration, metric, baseline, current, change, p_value, verdict."""
    records = []
    for configuration in sorted(set(baseline) | set(current)):
        for metric in GATED:
            before = baseline.get(configuration, {}).get(metric)
            after = current.get(configuration, {}).get(metric)
            record = {"configuration": configuration, "metric": metric, "baseline": before, "current": after,
                      "change": None if before is None or after is None else after - before, "p_value": None}
            if before is None:
                record["verdict"] = "new"
            elif after is None:
                record["verdict"] = "missing"
            else:
                pair = [(rows or {}).get(configuration) for rows in (current_rows, baseline_rows)]
                if all(p is not None for p in pair) and set(pair[0]["id"]) == set(pair[1]["id"]):
                    record["p_value"] = compare(pair[0], pair[1], TEST_METRIC[metric], 1.0, alpha, permutations,
                                                seed).p_value
                record["verdict"] = _verdict(record["change"], record["p_value"], tolerance, alpha)
            records.append(record)
    return pd.DataFrame.from_records(records, columns=["configuration", "metric", "baseline", "current", "change",
                                                       "p_value", "verdict"])


def _verdict(change: float, p_value: float | None, tolerance: float, alpha: float) -> str:
    real = p_value is None or p_value < alpha
    if change < -tolerance and real:
        return "regression"
    if change > tolerance and real:
        return "improved"
    return "ok"


def failed(verdicts: pd.DataFrame) -> pd.DataFrame:
    return verdicts[verdicts["verdict"].isin(FAILING)]


def explain(verdicts: pd.DataFrame) -> str:
    """One line per failing verdict: what fell, from what to what, and how sure we are."""
    lines = []
    for row in failed(verdicts).itertuples(index=False):
        if row.verdict == "missing":
            lines.append(f"{row.configuration}: no {row.metric} tonight (the baseline has {row.baseline:.4f})")
        else:
            evidence = "" if pd.isna(row.p_value) else f", p = {row.p_value:.4f}"
            lines.append(f"{row.configuration}: {row.metric} fell {-row.change:.4f} "
                         f"({row.baseline:.4f} -> {row.current:.4f}{evidence})")
    return "\n".join(lines)


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
