"""Where a run writes (the MLflow store, its artifacts, the stage cache, the LLM call cache, the embedding store),
checked before any work: a folder that is a file, a read-only store, a damaged SQLite file or a nearly full disk is
one line naming the file and the fix, not a traceback after the stages ran."""
from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from flows.orchestration.server import prefect_home, uses_temporary_server
from opi.schemas import OPIConfig

MIN_FREE_MB = 200  # below this a sweep's cache and artifacts would fill the disk mid-run


class StoreError(OSError):
    """A place a run writes to that it cannot use."""


def writable_folder(folder: Path, what: str) -> None:
    """``folder`` exists (or can be created) as a writable directory, on a disk with room."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise StoreError(f"{what}: {existing} is a file, not a folder; move it away or point {what} elsewhere")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise StoreError(f"{what}: {existing} is not writable by this user; fix its permissions or point {what} "
                         "elsewhere")
    free_mb = shutil.disk_usage(existing).free / 2**20
    if free_mb < MIN_FREE_MB:
        raise StoreError(f"{what}: only {free_mb:.0f} MB free on the disk of {existing} (at least {MIN_FREE_MB} MB "
                         "needed); free some space or point it at another disk")


def writable_file(path: Path, what: str) -> None:
    writable_folder(path.parent, what)
    if path.exists() and (path.is_dir() or not os.access(path, os.W_OK)):
        raise StoreError(f"{what}: {path} is {'a folder' if path.is_dir() else 'read-only'}; "
                         f"it must be a writable file")


def intact_sqlite(path: Path, what: str, fix: str) -> None:
    """An existing SQLite file passes ``PRAGMA quick_check`` (a new or empty one is made by its first use)."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    seen = (str(path.resolve()), path.stat().st_size, path.stat().st_mtime_ns)
    if seen in _INTACT:  # each job of a sweep checks the stores again: read a large file once per process
        return
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)) as database:
            verdict = database.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{what}: {path} is not a readable SQLite database ({err}): {fix}") from None
    if verdict != "ok":
        raise StoreError(f"{what}: {path} is damaged (SQLite's quick_check: {verdict[:80]}): {fix}")
    _INTACT.add(seen)


_INTACT: set[tuple[str, int, int]] = set()


MLFLOW_FIX = "move it away (a new store is made) or restore it from a backup"
LLM_CACHE_FIX = "move it away or delete it (the replies it kept will be asked again)"
EMBEDDING_STORE_FIX = "move it away or delete it (the vectors it kept will be computed again)"


def stage_cache(folder: Path) -> None:
    writable_folder(folder, "paths.cache_dir")
    for part in ("results", "keys", "locks"):
        if (folder / part).exists() and not (folder / part).is_dir():
            raise StoreError(f"paths.cache_dir: {folder / part} is a file, where the stage cache keeps a folder: "
                             "move it away, or point paths.cache_dir elsewhere")


def check_stores(config: OPIConfig) -> None:
    """Every place the run writes, before any work: one ``StoreError`` naming the first that cannot be used."""
    if uses_temporary_server():  # its database lives there
        writable_folder(prefect_home(), "PREFECT_HOME")
    stage_cache(Path(config.paths.cache_dir))
    writable_file(Path(config.paths.llm_cache), "paths.llm_cache")
    intact_sqlite(Path(config.paths.llm_cache), "paths.llm_cache", LLM_CACHE_FIX)
    writable_file(Path(config.paths.embedding_store), "paths.embedding_store")
    intact_sqlite(Path(config.paths.embedding_store), "paths.embedding_store", EMBEDDING_STORE_FIX)
    if not config.tracking.enabled:
        return
    uri = config.tracking.tracking_uri
    if uri.startswith("sqlite:///"):
        writable_file(Path(uri.removeprefix("sqlite:///")), "tracking.tracking_uri")
        intact_sqlite(Path(uri.removeprefix("sqlite:///")), "tracking.tracking_uri", MLFLOW_FIX)
    elif uri.startswith("file:") or "://" not in uri:
        writable_folder(Path(uri.removeprefix("file://").removeprefix("file:")), "tracking.tracking_uri")
    location = config.tracking.artifact_location
    if location and "://" not in location:
        writable_folder(Path(location), "tracking.artifact_location")
