"""A persistent call cache in SQLite: safe for several processes at once, and every answer is committed as soon as
it arrives, so a crash loses nothing already paid for."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any


def call_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class CallCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            connection.execute("PRAGMA busy_timeout=60000")
            self._local.connection = connection
        return connection

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._connect().execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, response: dict[str, Any]) -> None:
        # INSERT OR IGNORE: when two processes make the same call, the first answer stays (both are valid).
        self._connect().execute("INSERT OR IGNORE INTO calls (key, response) VALUES (?, ?)",
                                (key, json.dumps(response, ensure_ascii=False)))

    def __len__(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM calls").fetchone()[0]
