"""The places where OPI relies on Prefect behaviour that has no public interface, each checked by a test that fails
loudly when a Prefect release changes it (``tests/flows/orchestration/test_prefect_adapter.py``). Checked against
Prefect 3.9.1."""
from __future__ import annotations

from pathlib import Path
from typing import Any

CHECKED_WITH = "3.9.1"
CACHED_STATE_NAME = "Cached"


def was_cached(state: Any) -> bool:
    """The task run's result came from the cache. Prefect has no predicate for it: its task engine names a cache
    hit's Completed state "Cached", and its own ``prefect/context.py`` compares the name the same way."""
    return state.name == CACHED_STATE_NAME


def with_result_storage(task: Any, storage: Any) -> Any:
    """``task`` writing its results to ``storage``, a block instance that is not saved on a server. ``Task()``
    accepts an unsaved block only as a ``Path`` (and then builds a plain ``LocalFileSystem`` at run time); an unsaved
    instance, set after the constructor's check, is used as it is."""
    task.result_storage = storage
    return task


class RelativeResultKeys:
    """For a result-storage block: Prefect's ``ResultStore`` asks the block for ``_resolve_path`` (by ``getattr``;
    there is no public protocol) to turn a result's key into the storage key it records in the result's metadata,
    and into the base its metadata keys are relative to. Answering with the key itself records it relative to the
    block's folder, so a cache folder that moves is still read."""

    def _resolve_path(self, path: str) -> Path:
        return Path(path)
