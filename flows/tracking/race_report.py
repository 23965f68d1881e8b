"""A race's outcome (``race.json`` in its sweep's folder, written by ``flows.run.race_sweep``) on its sweep's parent
run: the race table (``race/race.csv``, ``race/race.md``), the verdict with its guarantee first in the run's
description, and the tag ``opi.race`` (a raced sweep: its eliminated runs saw fewer examples, so its tables are not
a full grid's)."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Callable

import pandas as pd
from mlflow import MlflowClient

from flows.tracking.notes import NOTE, limited

RACE_FILE = "race.json"  # a race's outcome, in its sweep's folder
RACE_NOTE = "**Race.**"  # how the race's verdict begins the parent's description
RACE_SUMMARY_TAG = "opi.race"  # on the parent: how many survived, by which metric


def log_race(client: MlflowClient, parent_run_id: str, outcome: dict[str, Any]) -> None:
    table = race_table(outcome)
    text = verdict(outcome)
    with tempfile.TemporaryDirectory() as folder:
        table.to_csv(Path(folder) / "race.csv", index=False)
        shown = table.astype(object).where(table.notna(), None).to_markdown(index=False, missingval="")
        (Path(folder) / "race.md").write_text(f"# Race\n\n{text}\n\n{shown}\n")
        client.log_artifacts(parent_run_id, folder, "race")
    before = client.get_run(parent_run_id).data.tags.get(NOTE, "")
    client.set_tag(parent_run_id, NOTE, limited(f"{RACE_NOTE} {text} The race table: Artifacts, race/race.md."
                                                f"\n\n{before}"))
    client.set_tag(parent_run_id, RACE_SUMMARY_TAG, f"{len(outcome['survivors'])} of {outcome['configurations']} "
                                                    f"survived, by {outcome['metric']}")


def read_outcome(sweep_dir: str | Path) -> dict[str, Any] | None:
    path = Path(sweep_dir) / RACE_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def named(outcome: dict[str, Any]) -> Callable[[str | None], str | None]:
    """A configuration's name in the race's words: the short name its run has in the sweep's tables where
    ``race.json`` has them (``names``), else its overrides."""
    names = outcome.get("names") or {}
    return lambda label: label if label is None else names.get(label, label)


def verdict(outcome: dict[str, Any]) -> str:
    """The race's answer in words, with the guarantee it carries."""
    survivors, n = [*map(named(outcome), outcome["survivors"])], outcome["configurations"]
    spent, grid = outcome["spent"]["examples"], outcome["grid_examples"]
    among = (f"is {survivors[0]}" if len(survivors) == 1 else
             f"is among the {len(survivors)} survivors: {', '.join(survivors)}")
    delta = outcome.get("indifference", 0.0)
    best = f"the best of these {n}" if not delta else f"one within {delta:g} of the best of these {n}"
    return (f"Race of {n} configurations by {outcome['metric']}, stopped because {outcome['stopped']}: with about "
            f"{1 - outcome['alpha']:.0%} confidence {best} on this data {among} (an asymptotic "
            f"guarantee, over whole clusters; it says nothing about data unlike this). It spent {spent:,} of the "
            f"full grid's {grid:,} example evaluations ({spent / grid:.0%}), {outcome['spent']['llm_calls']:,} LLM "
            f"calls, ${outcome['spent']['usd']:.2f}.")


def race_table(outcome: dict[str, Any]) -> pd.DataFrame:
    """Survivors first (best estimate first), then the eliminated in the order they were dropped."""
    order = {e["configuration"]: i for i, e in enumerate(outcome["eliminated"])}
    place = {"survivor": 0, "eliminated": 1, "bound": 2}
    rows = sorted(outcome["jobs"].values(), key=lambda o: (place[o["outcome"]], order.get(o["label"], -1),
                                                           -(o["estimate"] or 0.0)))
    name = named(outcome)
    return pd.DataFrame([{
        "configuration": name(o["label"]), "overrides": o["label"], "outcome": o["outcome"],
        "rounds_run": o["rounds_run"], "clusters": o["clusters"], "examples": o["examples"],
        outcome["metric"]: None if o["estimate"] is None else round(o["estimate"], 4),
        "compared_with": name(o["leader"]), "dropped_as": ("within" if o.get("within") else "worse")
        if o["outcome"] == "eliminated" else None, "difference": o["difference"], "difference_low": o["low"],
        "difference_high": o["high"], "llm_calls": o["spent"].get("llm_calls"), "usd": o["spent"].get("usd")}
        for o in rows])


def raced(client: MlflowClient, parent_run_id: str) -> str | None:
    """A raced sweep's race table and verdict (its parent's ``race/race.md``), or None for a grid."""
    if RACE_SUMMARY_TAG not in client.get_run(parent_run_id).data.tags:
        return None
    with tempfile.TemporaryDirectory() as folder:
        return Path(client.download_artifacts(parent_run_id, "race/race.md", folder)).read_text()
