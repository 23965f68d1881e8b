"""Where a run writes (the MLflow store, its artifacts, the stage cache, the LLM call cache, the embedding store),
checked before any work: a folder that is a file, a read-only store, a damaged SQLite file, a file that is another
program's database, stores inside one another or a nearly full disk is one line naming the file and the fix, not a
traceback after the stages ran. A store another process is writing is busy, not damaged: waited for (bounded, said)."""
from __future__ import annotations

import functools
import logging
import os
import shutil
import sqlite3
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Callable

from flows.orchestration.server import prefect_home, uses_temporary_server
from opi.schemas import OPIConfig
from opi.memory import MEMORY
from opi.sqlite_file import AGAIN, SQLiteFile, columns, foreign

log = logging.getLogger("opi")
MIN_FREE_MB = 200  # below this a sweep's cache and artifacts would fill the disk mid-run
BUSY_WAIT_S = 120  # how long a store another process is writing is waited for, at the start of a run
# the places this process's run writes, by the setting naming each (the stage cache, the LLM call cache, ...): a
# store error names the store a failing file belongs to
PLACES: dict[str, Path] = {}


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
    usage = shutil.disk_usage(existing)
    if usage.total == 0:  # root may write anywhere, but /proc and /sys keep no files
        raise StoreError(f"{what}: {existing} is on no disk (a file system of the kernel's, such as /proc or /sys, "
                         f"which keeps no files); point {what} elsewhere")
    free_mb = usage.free / 2**20
    if free_mb < MIN_FREE_MB:
        raise StoreError(f"{what}: only {free_mb:.0f} MB free on the disk of {existing} (at least {MIN_FREE_MB} MB "
                         "needed); free some space or point it at another disk")


def writable_file(path: Path, what: str) -> None:
    writable_folder(path.parent, what)
    if path.exists() and (path.is_dir() or not os.access(path, os.W_OK)):
        raise StoreError(f"{what}: {path} is {'a folder' if path.is_dir() else 'read-only'}; "
                         f"it must be a writable file")


def intact_sqlite(path: Path, what: str, fix: str, store: type[SQLiteFile] | None = None) -> None:
    """An existing SQLite file passes ``PRAGMA quick_check`` (a new or empty one is made by its first use) and, for
    one of OPI's own stores (``store``), holds that store's tables and no others. A file another process is writing
    is waited for, up to ``BUSY_WAIT_S`` (said), then one line saying it is busy, not damaged."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    seen = (str(path.resolve()), path.stat().st_size, path.stat().st_mtime_ns)
    if MEMORY.holds("checked stores", seen):  # each job of a sweep checks the stores again: read a large file once per process
        return
    try:
        verdict, found = when_free(path, what, lambda db: (db.execute("PRAGMA quick_check").fetchone()[0],
                                                           columns(db) if store else {}))
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{what}: {path} is not a readable SQLite database ({err}): {fix}") from None
    if verdict != "ok":
        raise StoreError(f"{what}: {path} is damaged (SQLite's quick_check: {verdict[:80]}): {fix}")
    reason = foreign(found, expected_tables(store)) if store else None
    if reason:
        raise StoreError(f"{what}: {path} is not an OPI {store_name(store)} ({reason}): point {what} at another "
                         "file, or move this one away")
    MEMORY.first_time("checked stores", seen)


def busy(err: sqlite3.Error) -> bool:
    """SQLite's answer when another connection holds the lock: the file is in use, not damaged."""
    return getattr(err, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or \
        "database is locked" in str(err)


def when_free(path: Path, what: str, read: Callable[[sqlite3.Connection], Any], wait: float | None = None) -> Any:
    """``read`` on the file opened read-only, once no other process holds it: waited for up to ``wait`` seconds
    (``BUSY_WAIT_S``; the wait said once), then a ``StoreError`` saying it is busy, not damaged."""
    wait = BUSY_WAIT_S if wait is None else wait
    deadline = None
    while True:
        try:
            with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1)) as database:
                return read(database)
        except sqlite3.OperationalError as err:
            if not busy(err):
                raise
            now = time.monotonic()
            if deadline is None:
                deadline = now + wait
                log.warning("%s: %s is busy (another process is writing to it): waiting up to %.0f s", what, path,
                            wait)
            if now >= deadline:
                raise StoreError(f"{what}: {path} is still busy after {wait:.0f} s: another process is writing to "
                                 f"it (it is not damaged): let that process finish (or stop it), {AGAIN}") from None
            time.sleep(0.5)


@functools.cache
def expected_tables(store: type[SQLiteFile]) -> dict[str, list[str]]:
    """The tables (and their columns) an OPI store of class ``store`` holds, as a new one is made."""
    with tempfile.TemporaryDirectory(prefix="opi-store-tables-") as folder:
        made = store(Path(folder) / "store.sqlite")
        try:
            return made.tables()
        finally:
            made._close()


def store_name(store: type[SQLiteFile]) -> str:
    return {"EmbeddingStore": "embedding store", "CallCache": "LLM call cache"}.get(store.__name__, "store")




MLFLOW_FIX = "move it away (a new store is made) or restore it from a backup"
LLM_CACHE_FIX = "move it away or delete it (the replies it kept will be asked again)"
EMBEDDING_STORE_FIX = "move it away or delete it (the vectors it kept will be computed again)"


def stage_cache(folder: Path) -> None:
    writable_folder(folder, "paths.cache_dir")
    for part in ("results", "keys", "locks", "kept"):
        if (folder / part).exists() and not (folder / part).is_dir():
            raise StoreError(f"paths.cache_dir: {folder / part} is a file, where the stage cache keeps a folder: "
                             "move it away, or point paths.cache_dir elsewhere")


def check_stores(config: OPIConfig) -> None:
    """Every place the run writes, before any work: one ``StoreError`` naming the first that cannot be used."""
    if uses_temporary_server():  # its database lives there
        writable_folder(prefect_home(), "PREFECT_HOME")
    from opi.embeddings.store import EmbeddingStore
    from opi.llm.cache import CallCache

    separate_stores(config, run_folders())
    stage_cache(Path(config.paths.cache_dir))
    writable_file(Path(config.paths.llm_cache), "paths.llm_cache")
    intact_sqlite(Path(config.paths.llm_cache), "paths.llm_cache", LLM_CACHE_FIX, CallCache)
    writable_file(Path(config.paths.embedding_store), "paths.embedding_store")
    intact_sqlite(Path(config.paths.embedding_store), "paths.embedding_store", EMBEDDING_STORE_FIX, EmbeddingStore)
    if not config.tracking.enabled:
        return
    uri = config.tracking.tracking_uri
    if uri.startswith("sqlite:///"):
        writable_file(Path(uri.removeprefix("sqlite:///")), "tracking.tracking_uri")
        intact_sqlite(Path(uri.removeprefix("sqlite:///")), "tracking.tracking_uri", MLFLOW_FIX)
    elif uri.startswith("file:") or "://" not in uri:
        writable_folder(Path(uri.removeprefix("file://").removeprefix("file:")), "tracking.tracking_uri")
    problem = tracking_server_problem(uri)
    if problem:
        raise StoreError(problem)
    location = config.tracking.artifacts()
    if location and "://" not in location:
        writable_folder(Path(location), "tracking.artifact_location")


ANSWERED = "answering tracking servers"  # the kind of opi.memory they are kept under
SERVER_WAIT_S = 10  # how long a tracking server is given to answer at the start (MLflow itself retries for minutes)


def tracking_server_problem(uri: str, setting: str = "tracking.tracking_uri") -> str | None:
    """Why an http(s) tracking server cannot be used (None: it answers, or the store is no server), checked once a
    process: any HTTP answer to its /health counts, so a proxy's or an authenticating server's refusal is left to
    MLflow to name."""
    if not uri.startswith(("http://", "https://")) or MEMORY.holds(ANSWERED, uri):
        return None
    import urllib.error
    import urllib.request

    from opi.secrets import redact_url

    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=SERVER_WAIT_S):
            pass
    except urllib.error.HTTPError:  # it answered
        pass
    except (OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        return (f"{setting}={redact_url(uri)}: no MLflow tracking server answers there ({reason}): start it, or "
                "point the setting at the running one")
    MEMORY.recall(ANSWERED, uri, lambda: True)
    return None


def places(config: OPIConfig) -> dict[str, tuple[Path, str]]:
    """Where the run's stores are, by the setting naming each: (path, "file" | "folder")."""
    found = {"paths.cache_dir": (Path(config.paths.cache_dir), "folder"),
             "paths.llm_cache": (Path(config.paths.llm_cache), "file"),
             "paths.embedding_store": (Path(config.paths.embedding_store), "file")}
    if config.tracking.enabled:
        uri = config.tracking.tracking_uri
        if uri.startswith("sqlite:///"):
            found["tracking.tracking_uri"] = (Path(uri.removeprefix("sqlite:///")), "file")
        elif uri.startswith("file:") or "://" not in uri:
            found["tracking.tracking_uri"] = (Path(uri.removeprefix("file://").removeprefix("file:")), "folder")
        location = config.tracking.artifacts()
        if location and "://" not in location:
            found["tracking.artifact_location"] = (Path(location), "folder")
    return {setting: (path.expanduser().resolve(), kind) for setting, (path, kind) in found.items()}


_SWEEP_FOLDER: dict[str, Path] = {}


def note_sweep_folder(config: Any) -> None:
    """A sweep's output folder, from its configuration (``Preflight`` checks a sweep before Hydra has set it)."""
    _SWEEP_FOLDER.clear()
    _SWEEP_FOLDER["hydra.sweep.dir"] = Path(config.hydra.sweep.dir).expanduser().resolve()


def run_folders() -> dict[str, Path]:
    """Hydra's output folders of this run (``hydra.run.dir``, ``hydra.sweep.dir``), when Hydra runs it."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return dict(_SWEEP_FOLDER)
    hydra = HydraConfig.get()
    folders = {"hydra.run.dir": hydra.run.dir} if hydra.mode is None or hydra.mode.name == "RUN" else {
        "hydra.sweep.dir": hydra.sweep.dir}
    return {setting: Path(folder).expanduser().resolve() for setting, folder in folders.items() if folder}


def separate_stores(config: OPIConfig, folders: dict[str, Path]) -> None:
    """Stores, caches and run folders apart: no two stores in one file (the embedding store or the LLM call cache
    in MLflow's database adds tables to it), no store inside MLflow's artifacts, nothing of MLflow's inside the
    stage cache (deleted to start cold), no run folder inside a store. The first overlap is one ``StoreError``
    naming both settings; the places are kept for naming the store of a failing file (``store_of``)."""
    stores = places(config)
    PLACES.clear()
    PLACES.update({setting: path for setting, (path, _) in stores.items()})
    files = [(s, p) for s, (p, kind) in stores.items() if kind == "file"]
    for i, (one, path) in enumerate(files):
        for other, other_path in files[i + 1:]:
            if path == other_path:
                raise StoreError(f"{one} and {other} are the same file ({path}): each store needs a file of its "
                                 f"own; point {one if one != 'tracking.tracking_uri' else other} at another file")
    mlflow = [s for s in stores if s.startswith("tracking.")]
    inside = [(s, "paths.cache_dir") for s in mlflow] + [
        (s, "tracking.artifact_location") for s in ("paths.cache_dir", "paths.llm_cache", "paths.embedding_store")]
    if stores.get("tracking.tracking_uri", (None, "file"))[1] == "folder":
        inside += [(s, "tracking.tracking_uri") for s in ("paths.cache_dir", "paths.llm_cache",
                                                          "paths.embedding_store")]
    for setting, store in inside:
        if setting in stores and store in stores and within(stores[setting][0], stores[store][0]):
            raise StoreError(f"{setting}={stores[setting][0]} is inside {store}={stores[store][0]}: keep the stores "
                             f"apart (point {setting} elsewhere)")
    containers = {s: p for s, (p, kind) in stores.items() if kind == "folder"}
    database = stores.get("tracking.tracking_uri")
    if database and database[1] == "file" and database[0].parent.name == MLFLOW_FOLDER:
        containers["tracking.tracking_uri"] = database[0].parent  # MLflow's own folder, not a project's beside it
    for run, folder in folders.items():
        for setting, container in containers.items():
            if within(folder, container):
                raise StoreError(f"{run}={folder} is inside {setting}={container}: a run's output folder is kept "
                                 f"apart from the stores; point {run} elsewhere")


MLFLOW_FOLDER = "mlruns"  # MLflow's own folder (its default, and OPI's: mlruns/mlflow.db, mlruns/artifacts)


def within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def store_of(filename: str | os.PathLike | None) -> str | None:
    """The setting naming the store ``filename`` belongs to (the deepest), None when it is in none of them."""
    if not filename:
        return None
    try:
        path = Path(filename).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    matches = [(len(place.parts), setting) for setting, place in PLACES.items() if within(path, place)]
    return max(matches)[1] if matches else None
