"""A race's outcome on its sweep's parent run: the race table (``race/race.csv``, ``race/race.md``), the verdict
with its guarantee first in the run's description, and the tag ``opi.race`` (a raced sweep: its eliminated runs
saw fewer examples, so its tables are not a full grid's)."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from mlflow import MlflowClient

from flows.run.race import race_table, verdict
from flows.tracking.notes import NOTE, limited


def log_race(client: MlflowClient, parent_run_id: str, outcome: dict[str, Any]) -> None:
    table = race_table(outcome)
    text = verdict(outcome)
    with tempfile.TemporaryDirectory() as folder:
        table.to_csv(Path(folder) / "race.csv", index=False)
        (Path(folder) / "race.md").write_text(f"# Race\n\n{text}\n\n{table.to_markdown(index=False)}\n")
        client.log_artifacts(parent_run_id, folder, "race")
    before = client.get_run(parent_run_id).data.tags.get(NOTE, "")
    client.set_tag(parent_run_id, NOTE, limited(f"**Race.** {text} The race table: Artifacts, race/race.md."
                                                f"\n\n{before}"))
    client.set_tag(parent_run_id, "opi.race", f"{len(outcome['survivors'])} of {outcome['configurations']} "
                                              f"survived, by {outcome['metric']}")
