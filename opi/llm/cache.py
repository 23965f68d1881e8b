"""A persistent call cache in SQLite: safe for several processes at once, and every answer is committed as soon as
it arrives, so a crash loses nothing already paid for. A cache file deleted (or replaced) while a run uses it is
noticed at the next call: it is made again, said once, and the replies from then on are kept."""
from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("opi")


def call_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class CallCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._file: tuple[int, int] | None = None  # (device, inode) of the file this cache opened
        self._open()

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()  # every thread reconnects
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL)")
        status = self.path.stat()
        self._file = (status.st_dev, status.st_ino)

    def _still_there(self) -> None:
        if self._same_file():
            return
        with self._lock:
            if not self._same_file():
                log.warning("the LLM call cache %s was deleted or replaced during the run: made again; replies from "
                            "now on are kept (those before were in the file that is gone)", self.path)
                self._open()

    def _same_file(self) -> bool:
        try:
            status = self.path.stat()
        except FileNotFoundError:
            return False
        return (status.st_dev, status.st_ino) == self._file

    def _connect(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA busy_timeout=60000")
            self._local.connection = connection
        return connection

    def get(self, key: str) -> dict[str, Any] | None:
        self._still_there()
        row = self._connect().execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, response: dict[str, Any], replace: bool = False) -> None:
        """Keep ``response`` under ``key``. When two processes make the same call, the first answer stays (both
        are valid); ``replace`` overwrites an entry that is no answer (an empty reply an older version cached)."""
        self._still_there()
        self._connect().execute(f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO calls (key, response) "
                                "VALUES (?, ?)", (key, json.dumps(response, ensure_ascii=False)))

    def __len__(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM calls").fetchone()[0]
