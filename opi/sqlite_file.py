"""An SQLite file several processes share: WAL journal, one connection per thread, a generous busy timeout, and
a file deleted (or replaced) while a run uses it noticed at the next use: made again, said once."""
from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

log = logging.getLogger("opi")


class SQLiteFile:
    def __init__(self, path: str | Path, schema: str, what: str):
        self.path, self.schema, self.what = Path(path), schema, what
        self._local = threading.local()
        self._lock = threading.Lock()
        self._file: tuple[int, int] | None = None  # (device, inode) of the file opened
        self._open()

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()  # every thread reconnects
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(self.schema)
        status = self.path.stat()
        self._file = (status.st_dev, status.st_ino)

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
            connection = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA busy_timeout=60000")
            self._local.connection = connection
        return connection
