"""The persistent embedding store: every vector computed, kept by (model key, text hash) in one SQLite table that
concurrent processes share (WAL; a vector written twice by two processes is the same vector, the first stays).

A model key names the model's *content* (``opi.embeddings.local.model_key``, ``EndpointEmbedder.key``), so a
retrained folder never serves stale vectors. The length of a model's vectors is kept beside them (table
``lengths``, from the vectors OPI computed; for a store made before it, the most common length found). An entry
that cannot be read as a vector of that length, or that is all zeros or not finite, is a miss: it is computed
again and replaced, never served; the misses are counted (``unusable``) and said once.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from opi.sqlite_file import SQLiteFile

SCHEMA = ("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, text BLOB NOT NULL, vector BLOB NOT NULL, "
          "PRIMARY KEY (model, text)) WITHOUT ROWID")
LENGTHS = "CREATE TABLE IF NOT EXISTS lengths (model TEXT PRIMARY KEY, length INTEGER NOT NULL)"
# each article's sentence spans by segmenter (its rules and code) and text: the other work on a text worth keeping
SENTENCES = ("CREATE TABLE IF NOT EXISTS sentences (segmenter TEXT NOT NULL, text BLOB NOT NULL, spans BLOB NOT NULL, "
             "PRIMARY KEY (segmenter, text)) WITHOUT ROWID")
log = logging.getLogger("opi")
BATCH = 500  # texts per SELECT (SQLite's default limit is 32,766 parameters)


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


class EmbeddingStore(SQLiteFile):
    damaged_fix = "move it away or delete it (the vectors it kept will be computed again)"

    def __init__(self, path: str | Path):
        self.unusable = 0  # entries found but not served (another length, all zeros, not finite): computed again
        super().__init__(path, SCHEMA, "embedding store")

    def statements(self) -> list[str]:
        return [SCHEMA, LENGTHS, SENTENCES]

    def _open(self) -> None:
        super()._open()
        db = self._connect()
        if db.execute("SELECT 1 FROM lengths LIMIT 1").fetchone() or not db.execute(
                "SELECT 1 FROM vectors LIMIT 1").fetchone():
            return
        # a store made before lengths were kept: each model's most common length (read once)
        found = db.execute("SELECT model, length(vector) / 4, COUNT(*) FROM vectors WHERE length(vector) % 4 = 0 "
                           "GROUP BY model, length(vector)").fetchall()
        common: dict[str, tuple[int, int]] = {}
        for model, length, n in found:
            if n > common.get(model, (0, 0))[1]:
                common[model] = (length, n)
        db.executemany("INSERT OR IGNORE INTO lengths (model, length) VALUES (?, ?)",
                       [(model, length) for model, (length, _) in common.items()])

    def length(self, model: str) -> int | None:
        """The length of ``model``'s vectors, as OPI computed them (None: none kept yet)."""
        row = self.connection().execute("SELECT length FROM lengths WHERE model = ?", (model,)).fetchone()
        return row[0] if row else None

    def get(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored raw vectors of ``texts`` under ``model`` (float32), by text; absent or unusable ones (another
        length than the model's, all zeros, not finite) left out, and counted."""
        found: dict[str, np.ndarray] = {}
        length = self.length(model)
        unusable = 0
        for text, blob in self._kept("SELECT text, vector FROM vectors WHERE model = ?", model, texts):
            vector = _vector(blob)
            if vector is None or (length is not None and len(vector) != length):
                unusable += 1
            else:
                found[text] = vector
        if unusable:
            self.said_unusable(unusable)
        return found

    def said_unusable(self, count: int) -> None:
        if not self.unusable:
            log.warning("the embedding store %s holds vectors that cannot be used (another length than the "
                        "model's, all zeros or not finite): they are computed again and replaced", self.path)
        self.unusable += count

    def put(self, model: str, vectors: Iterable[tuple[str, np.ndarray]]) -> None:
        """Keep the vectors OPI computed (one that is all zeros or not finite is not kept: it would be a miss);
        their length becomes the model's."""
        arrays = [(t, np.ascontiguousarray(v, dtype=np.float32)) for t, v in vectors]
        rows = [(model, text_key(t), v.tobytes()) for t, v in arrays if usable(v)]
        if not rows:
            return
        db = self.connection()
        db.execute("BEGIN")
        try:
            # REPLACE: an unreadable entry that was read as a miss is overwritten by the vector computed again
            db.executemany("INSERT OR REPLACE INTO vectors (model, text, vector) VALUES (?, ?, ?)", rows)
            db.execute("INSERT OR REPLACE INTO lengths (model, length) VALUES (?, ?)", (model, len(rows[0][2]) // 4))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # SQLite ends the transaction itself on some errors (a full disk)
                db.execute("ROLLBACK")
            raise

    def sentence_spans(self, segmenter: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The kept (start, end) sentence spans of ``texts`` under ``segmenter``, an (n, 2) int64 array by text;
        an entry that cannot be spans of its text (cut short, out of the text, not in order) is left out."""
        found: dict[str, np.ndarray] = {}
        for text, blob in self._kept("SELECT text, spans FROM sentences WHERE segmenter = ?", segmenter, texts):
            spans = _spans(blob, len(text))
            if spans is not None:
                found[text] = spans
        return found

    def _kept(self, query: str, scope: str, texts: Sequence[str]) -> Iterator[tuple[str, Any]]:
        """(text, stored value) of each of ``texts`` that ``query`` (selecting the text's key and a value, scoped
        by one parameter) finds, asked ``BATCH`` texts at a time."""
        keys = {text_key(t): t for t in dict.fromkeys(texts)}
        wanted, db = list(keys), self.connection()
        for start in range(0, len(wanted), BATCH):
            part = wanted[start:start + BATCH]
            for key, value in db.execute(f"{query} AND text IN ({','.join('?' * len(part))})",
                                         (scope, *part)).fetchall():
                yield keys[bytes(key)], value

    def put_sentence_spans(self, segmenter: str, spans: Iterable[tuple[str, np.ndarray]]) -> None:
        rows = [(segmenter, text_key(t), np.ascontiguousarray(s, dtype=np.int64).tobytes()) for t, s in spans]
        if rows:
            self.connection().executemany(
                "INSERT OR REPLACE INTO sentences (segmenter, text, spans) VALUES (?, ?, ?)", rows)

    def count(self, model: str | None = None) -> int:
        if model is None:
            return self.connection().execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        return self.connection().execute("SELECT COUNT(*) FROM vectors WHERE model = ?", (model,)).fetchone()[0]


def usable(vector: np.ndarray) -> bool:
    """A vector that can be served: finite, not all zeros (no model's embedding of a text; a cosine of 0)."""
    return bool(vector.size) and bool(np.isfinite(vector).all()) and bool(vector.any())


def _vector(blob) -> np.ndarray | None:
    if not isinstance(blob, (bytes, memoryview)) or len(blob) == 0 or len(blob) % 4:
        return None
    vector = np.frombuffer(bytes(blob), dtype=np.float32)
    return vector if usable(vector) else None


def _spans(blob, length: int) -> np.ndarray | None:
    if not isinstance(blob, (bytes, memoryview)) or len(blob) % 16:
        return None
    spans = np.frombuffer(bytes(blob), dtype=np.int64).reshape(-1, 2)
    flat = spans.ravel()
    if flat.size and (flat[0] < 0 or flat[-1] > length or (np.diff(flat) < 0).any() or
                      (spans[:, 1] <= spans[:, 0]).any()):
        return None
    return spans
