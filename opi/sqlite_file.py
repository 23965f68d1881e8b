"""An SQLite file several processes share: WAL journal, one connection per thread, a generous busy timeout, and
a file deleted (or replaced) while a run uses it noticed at the next use: made again, said once.

A store that cannot be used (its disk full, the file made read-only, another process holding it past the busy
timeout, a damaged file, a file that is another program's database) is a ``StoreFault`` naming the file and what to
do: one line for the command, not a traceback. A file this process created and could not set up is removed, so no
empty store is left behind; a file holding tables other than the store's is refused before anything is added."""
from __future__ import annotations

import logging
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

log = logging.getLogger("opi")
AGAIN = "then run the same command again (finished stages are kept)"


class StoreFault(Exception):
    """A store OPI keeps in SQLite that cannot be used now: the message names the file and the next step."""


FULL, READ_ONLY = "its disk is full", "it is read-only"  # what sqlite_problem says happened


def sqlite_problem(err: BaseException) -> tuple[str, str] | None:
    """(what happened, what to do) for an SQLite error that is the state of a store or of its disk (full,
    read-only, busy, unopenable, damaged), None for anything else (a bug). The text is SQLite's own, also as
    SQLAlchemy and MLflow repeat it."""
    text = str(err).lower()
    if "disk is full" in text:
        return FULL, f"free some space on that disk, {AGAIN}"
    if "readonly" in text or "read-only" in text:
        return READ_ONLY, f"make the file and its folder writable again, {AGAIN}"
    if "database is locked" in text or "database table is locked" in text or "database is busy" in text:
        return ("it is busy: another process is writing to it (it is not damaged)",
                f"let that process finish (or stop it), {AGAIN}")
    if "unable to open database file" in text:
        return ("it cannot be opened (its folder was removed or is not writable)",
                f"restore the folder or fix its permissions, {AGAIN}")
    if "disk i/o error" in text:
        return "a disk I/O error (the disk full, removed or made read-only)", f"check that disk, {AGAIN}"
    if "malformed" in text or "not a database" in text:
        return "it is damaged", ""
    return None


def refused_by_disk(err: BaseException) -> bool:
    """A full or read-only disk refused a new file's setup: no other process can have set it up either. Any other
    failure (another process setting the same new file up holds it busy) leaves the file to that process."""
    problem = sqlite_problem(err.__cause__ or err)
    return problem is not None and problem[0] in (FULL, READ_ONLY)


class _Connection(sqlite3.Connection):
    """A connection whose errors that are the store's state (``sqlite_problem``) are a ``StoreFault`` naming it,
    when a statement runs and when its rows are read."""

    store: "SQLiteFile"

    def execute(self, *args):  # type: ignore[override]
        try:
            return super().cursor(_Cursor).execute(*args)
        except sqlite3.Error as err:
            raise_fault(self.store, err)

    def executemany(self, *args):  # type: ignore[override]
        try:
            return super().cursor(_Cursor).executemany(*args)
        except sqlite3.Error as err:
            raise_fault(self.store, err)


class _Cursor(sqlite3.Cursor):
    def fetchone(self):
        try:
            return super().fetchone()
        except sqlite3.Error as err:
            raise_fault(self.connection.store, err)

    def fetchall(self):
        try:
            return super().fetchall()
        except sqlite3.Error as err:
            raise_fault(self.connection.store, err)


def raise_fault(store: "SQLiteFile", err: sqlite3.Error) -> None:
    fault = store.fault(err)
    if fault is err:
        raise err
    raise fault from err


class SQLiteFile:
    damaged_fix = "move it away or delete it (a new one is made)"

    def __init__(self, path: str | Path, schema: str, what: str):
        self.path, self.schema, self.what = Path(path), schema, what
        self._local = threading.local()
        self._lock = threading.Lock()
        self._file: tuple[int, int] | None = None  # (device, inode) of the file opened
        self._open()

    def fault(self, err: sqlite3.Error) -> Exception:
        """``err`` as the ``StoreFault`` it is (naming this store and what to do), or itself when it is a bug."""
        problem = sqlite_problem(err)
        if problem is None:
            return err
        happened, step = problem
        return StoreFault(f"the {self.what} {self.path}: {happened} ({err}): {step or self.damaged_fix}")

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        self._local = threading.local()  # every thread reconnects
        try:
            db = self._connect()
            self.refuse_foreign(db)
            write_ahead(db)
            for statement in self.statements():
                db.execute(statement)
            status = self.path.stat()
        except BaseException as err:
            self._close()
            if created and refused_by_disk(err):
                self._remove_unfinished()
            raise
        self._file = (status.st_dev, status.st_ino)

    def statements(self) -> list[str]:
        """What makes the store's tables (each ``CREATE TABLE IF NOT EXISTS``) and brings an older file up to date."""
        return [self.schema]

    def tables(self) -> dict[str, list[str]]:
        """The columns of each table the store's statements make, as SQLite reports them."""
        with closing(sqlite3.connect(":memory:")) as memory:
            for statement in self.statements():
                if statement.lstrip().upper().startswith("CREATE"):
                    memory.execute(statement)
            return columns(memory)

    def refuse_foreign(self, db: sqlite3.Connection) -> None:
        """A file holding other tables, or the store's tables with other columns, is not this store: refused
        before anything is added to it (it may be another program's database, MLflow's)."""
        reason = foreign(columns(db), self.tables())
        if reason:
            raise StoreFault(f"the {self.what} {self.path} is not an OPI {self.what} ({reason}): point the setting "
                             "at another file, or move this one away (nothing was written to it)")

    def _remove_unfinished(self) -> None:
        """The file this process created and could not set up (a full or read-only disk): removed when it holds
        nothing (no page past SQLite's header, an empty journal), so no empty or partial store is left."""
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            if self.path.stat().st_size > 4096 or (wal.exists() and wal.stat().st_size > 0):
                return
            for leftover in (self.path, wal, self.path.with_name(self.path.name + "-shm"),
                             self.path.with_name(self.path.name + "-journal")):
                leftover.unlink(missing_ok=True)
        except OSError:
            pass

    def still_there(self) -> None:
        if self._same_file():
            return
        with self._lock:
            if not self._same_file():
                log.warning("the %s %s was deleted or replaced during the run: made again; what is computed from "
                            "now on is kept (what came before was in the file that is gone)", self.what, self.path)
                self._open()

    def _same_file(self) -> bool:
        try:
            status = self.path.stat()
        except FileNotFoundError:
            return False
        return (status.st_dev, status.st_ino) == self._file

    def connection(self) -> sqlite3.Connection:
        self.still_there()
        return self._connect()

    def _connect(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            try:
                connection = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False,
                                             factory=_Connection)
            except sqlite3.Error as err:
                raise_fault(self, err)
            connection.store = self
            connection.execute("PRAGMA busy_timeout=60000")
            self._local.connection = connection
        return connection

    def _close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            self._local.connection = None
            connection.close()


def write_ahead(db: sqlite3.Connection, patience: float = 60.0) -> None:
    """The WAL journal. SQLite answers "database is locked" at once, without its busy handler, while another
    process is setting the journal of the same new file up: asked again for up to ``patience`` seconds (two
    processes creating one store at once failed one time in ten without it)."""
    deadline = time.monotonic() + patience
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except StoreFault as fault:
            locked = isinstance(fault.__cause__, sqlite3.OperationalError) and "locked" in str(fault.__cause__)
            if not locked or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def foreign(found: dict[str, list[str]], wanted: dict[str, list[str]]) -> str | None:
    """Why a file whose tables are ``found`` is not the store whose tables are ``wanted`` (None: it is, or it is
    empty): it holds other tables, or one of the store's with other columns."""
    other = sorted(set(found) - set(wanted))
    changed = sorted(t for t in set(found) & set(wanted) if found[t] != wanted[t])
    if changed:
        return f"its table {changed[0]!r} has the columns {', '.join(found[changed[0]])}"
    if other:
        return f"it holds the tables {', '.join(other[:5])}{' ...' if len(other) > 5 else ''}"
    return None


def columns(db: sqlite3.Connection) -> dict[str, list[str]]:
    names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                          "'sqlite_%'")]
    return {name: [row[1] for row in db.execute(f'PRAGMA table_info("{name}")')] for name in names}
