"""A persistent call cache in SQLite: safe for several processes at once, and every answer is committed as soon as
it arrives, so a crash loses nothing already paid for. A cache file deleted (or replaced) while a run uses it is
noticed at the next call: it is made again, said once, and the replies from then on are kept."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from opi.sqlite_file import SQLiteFile


def call_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class CallCache(SQLiteFile):
    def __init__(self, path: str | Path):
        super().__init__(path, "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, response TEXT NOT NULL)",
                         "LLM call cache")

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.connection().execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, response: dict[str, Any], replace: bool = False) -> None:
        """Keep ``response`` under ``key``. When two processes make the same call, the first answer stays (both
        are valid); ``replace`` overwrites an entry that is no answer (an empty reply an older version cached)."""
        self.connection().execute(f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO calls (key, response) "
                                  "VALUES (?, ?)", (key, json.dumps(response, ensure_ascii=False)))

    def __len__(self) -> int:
        return self.connection().execute("SELECT COUNT(*) FROM calls").fetchone()[0]
