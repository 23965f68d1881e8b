"""The persistent embedding store: every vector computed, kept by (model key, text hash) in one SQLite table that
concurrent processes share (WAL; a vector written twice by two processes is the same vector, the first stays).

A model key names the model's *content* (``opi.embeddings.local.model_key``, ``EndpointEmbedder.key``), so a
retrained folder never serves stale vectors. An entry that cannot be read as a vector of the model's length is a
miss: it is computed again and replaced.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from opi.sqlite_file import SQLiteFile

SCHEMA = ("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text BLOB NOT NULL, vector BLOB NOT NULL, "
          "PRIMARY KEY (model, text)) WITHOUT ROWID")
BATCH = 500  # texts per SELECT (SQLite's default limit is 32,766 parameters)


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


class EmbeddingStore(SQLiteFile):
    def __init__(self, path: str | Path):
        super().__init__(path, SCHEMA, "embedding store")

    def get(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored raw vectors of ``texts`` under ``model`` (float32), by text; absent or unreadable ones left
        out."""
        keys = {text_key(t): t for t in dict.fromkeys(texts)}
        found: dict[str, np.ndarray] = {}
        db = self.connection()
        wanted = list(keys)
        for start in range(0, len(wanted), BATCH):
            part = wanted[start:start + BATCH]
            rows = db.execute(f"SELECT text, vector FROM vectors WHERE model = ? AND text IN "
                              f"({','.join('?' * len(part))})", (model, *part)).fetchall()
            for key, blob in rows:
                vector = _vector(blob)
                if vector is not None:
                    found[keys[bytes(key)]] = vector
        return found

    def put(self, model: str, vectors: Iterable[tuple[str, np.ndarray]]) -> None:
        rows = [(model, text_key(t), np.ascontiguousarray(v, dtype=np.float32).tobytes()) for t, v in vectors]
        db = self.connection()
        db.execute("BEGIN")
        try:
            # REPLACE: an unreadable entry that was read as a miss is overwritten by the vector computed again
            db.executemany("INSERT OR REPLACE INTO vectors (model, text, vector) VALUES (?, ?, ?)", rows)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def count(self, model: str | None = None) -> int:
        if model is None:
            return self.connection().execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        return self.connection().execute("SELECT COUNT(*) FROM vectors WHERE model = ?", (model,)).fetchone()[0]


def _vector(blob) -> np.ndarray | None:
    if not isinstance(blob, (bytes, memoryview)) or len(blob) == 0 or len(blob) % 4:
        return None
    vector = np.frombuffer(bytes(blob), dtype=np.float32)
    return vector if np.isfinite(vector).all() else None
