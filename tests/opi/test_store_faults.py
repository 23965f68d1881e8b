"""OPI's own SQLite stores (the embedding store, the LLM call cache) when their disk or file fails: a full disk, a
read-only file, another writer holding it, another program's database are each a ``StoreFault`` naming the file and
the next step; a new file that could not be set up is removed; stored vectors that cannot be served (another
length, all zeros, not finite) are misses, computed again and counted."""
import sqlite3
import threading

import numpy as np
import pytest

from opi.embeddings import EmbeddingStore
from opi.embeddings.store import text_key
from opi.llm.cache import CallCache
from opi.sqlite_file import StoreFault, _Connection, raise_fault
from tests.opi.test_embedding_store import LengthEmbedder

AGAIN = "then run the same command again (finished stages are kept)"


def test_a_disk_that_fills_during_a_write_is_a_store_fault_and_keeps_what_was_written(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    store = EmbeddingStore(path)
    store.put("m", [("kept", np.ones(4, dtype=np.float32))])
    db = store.connection()
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count={pages + 1}")  # SQLite's own "database or disk is full" at the next pages
    many = [(f"text {i}", np.full(256, i + 1, dtype=np.float32)) for i in range(200)]
    with pytest.raises(StoreFault) as failed:
        store.put("m", many)
    assert str(failed.value) == (f"the embedding store {path}: its disk is full (database or disk is full): free some "
                                 f"space on that disk, {AGAIN}")
    reopened = EmbeddingStore(path)
    assert reopened.count("m") == 1 and list(reopened.get("m", ["kept"])) == ["kept"]  # the failed batch: none


def test_a_new_store_that_cannot_be_set_up_leaves_no_file(tmp_path, monkeypatch):
    real = _Connection.execute

    def full(self, statement, *args):
        if statement.lstrip().upper().startswith("CREATE"):  # SQLite's own "database or disk is full"
            real(self, "PRAGMA max_page_count=1")
        return real(self, statement, *args)

    monkeypatch.setattr(_Connection, "execute", full)
    with pytest.raises(StoreFault, match="its disk is full"):
        EmbeddingStore(tmp_path / "embeddings.sqlite")
    assert list(tmp_path.iterdir()) == []  # no 0-byte embeddings.sqlite, no -wal or -shm


def test_a_new_store_another_process_holds_busy_is_left_to_that_process(tmp_path, monkeypatch):
    """Two processes making the same new store: the one that finds it busy must not remove the file the other is
    setting up (the other would then fail with a disk I/O error)."""
    real = _Connection.execute

    def busy(self, statement, *args):
        if statement.lstrip().upper().startswith("CREATE"):  # as the statement reports SQLite's busy error
            raise_fault(self.store, sqlite3.OperationalError("database is locked"))
        return real(self, statement, *args)

    monkeypatch.setattr(_Connection, "execute", busy)
    with pytest.raises(StoreFault, match="it is busy"):
        EmbeddingStore(tmp_path / "embeddings.sqlite")
    assert (tmp_path / "embeddings.sqlite").exists()


def test_a_store_made_read_only_during_the_run_is_a_store_fault(tmp_path):
    path = tmp_path / "llm_calls.sqlite"
    cache = CallCache(path)
    cache.put("a", {"text": "kept"})
    read_only = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None, factory=_Connection)
    read_only.store = cache
    cache._local.connection = read_only  # as if the file had been made read-only (root ignores permissions)
    with pytest.raises(StoreFault) as failed:
        cache.put("b", {"text": "lost"})
    assert str(failed.value) == (f"the LLM call cache {path}: it is read-only (attempt to write a readonly database): "
                                 f"make the file and its folder writable again, {AGAIN}")
    assert cache.get("a") == {"text": "kept"}


def test_a_store_another_process_holds_past_the_busy_timeout_is_busy_not_damaged(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    store = EmbeddingStore(path)
    store.connection().execute("PRAGMA busy_timeout=200")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreFault) as failed:
            store.put("m", [("alpha", np.ones(3, dtype=np.float32))])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(failed.value).startswith(f"the embedding store {path}: it is busy: another process is writing to it "
                                        "(it is not damaged) (database is locked): let that process finish")
    store.put("m", [("alpha", np.ones(3, dtype=np.float32))])  # free again: it works
    assert store.count("m") == 1


def test_a_writer_holding_the_store_for_a_while_is_waited_for(tmp_path):
    path = tmp_path / "embeddings.sqlite"
    store = EmbeddingStore(path)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(1.0, lambda: holder.execute("ROLLBACK"))
    release.start()
    store.put("m", [("alpha", np.ones(3, dtype=np.float32))])  # the store's busy timeout is 60 s
    release.join()
    assert store.count("m") == 1


@pytest.mark.parametrize("store, table, columns", [
    (EmbeddingStore, "vectors", "(id INTEGER PRIMARY KEY, embedding BLOB)"),
    (CallCache, "calls", "(id INTEGER, body TEXT)"),
])
def test_a_table_with_other_columns_is_not_an_opi_store(tmp_path, store, table, columns):
    path = tmp_path / "store.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(f"CREATE TABLE {table} {columns}")
    with pytest.raises(StoreFault) as refused:
        store(path)
    what = "embedding store" if store is EmbeddingStore else "LLM call cache"
    assert str(refused.value).startswith(f"the {what} {path} is not an OPI {what} (its table '{table}' has the "
                                         "columns id, ")
    assert "point the setting at another file, or move this one away (nothing was written to it)" in str(refused.value)


def test_another_programs_database_is_refused_and_nothing_is_added_to_it(tmp_path):
    path = tmp_path / "mlflow.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE experiments (experiment_id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("CREATE TABLE runs (run_uuid TEXT PRIMARY KEY)")
    with pytest.raises(StoreFault, match=r"is not an OPI embedding store \(it holds the tables experiments, runs\)"):
        EmbeddingStore(path)
    with sqlite3.connect(path) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")] == [
            "experiments", "runs"]
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL either


def test_vectors_of_another_length_are_misses_computed_again_and_counted(tmp_path):
    path = tmp_path / "e.sqlite"
    texts = ["alpha", "beta", "gamma", "delta"]
    LengthEmbedder(EmbeddingStore(path)).raw(texts)
    with sqlite3.connect(path) as db:  # most of them the wrong length: the length OPI computed still decides
        db.executemany("UPDATE vectors SET vector = ? WHERE text = ?",
                       [(np.ones(5, dtype=np.float32).tobytes(), text_key(t)) for t in texts[:3]])
    store = EmbeddingStore(path)
    again = LengthEmbedder(store)
    np.testing.assert_array_equal(again.raw(texts), [[len(t), ord(t[0]), 1.0] for t in texts])
    assert again.computed == texts[:3] and again.store_hits == 1 and store.unusable == 3
    replaced = LengthEmbedder(EmbeddingStore(path))
    replaced.raw(texts)
    assert replaced.computed == [] and replaced.store_hits == 4


@pytest.mark.parametrize("stored", [np.zeros(3), np.array([1.0, np.inf, 1.0])], ids=["all zeros", "not finite"])
def test_a_stored_vector_of_the_right_length_that_is_no_embedding_is_never_served(tmp_path, stored, caplog):
    path = tmp_path / "e.sqlite"
    LengthEmbedder(EmbeddingStore(path)).raw(["alpha"])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE vectors SET vector = ?", (stored.astype(np.float32).tobytes(),))
    store = EmbeddingStore(path)
    again = LengthEmbedder(store)
    assert again.raw(["alpha"]).tolist() == [[5, 97, 1]]
    assert again.computed == ["alpha"] and store.unusable == 1
    assert "holds vectors that cannot be used" in caplog.text


def test_an_all_zero_vector_computed_is_not_kept(tmp_path):
    store = EmbeddingStore(tmp_path / "e.sqlite")
    store.put("m", [("empty", np.zeros(3, dtype=np.float32)), ("full", np.ones(3, dtype=np.float32))])
    assert store.count("m") == 1 and list(store.get("m", ["empty", "full"])) == ["full"]


def test_a_store_made_before_lengths_were_kept_learns_each_models_most_common_length(tmp_path):
    path = tmp_path / "e.sqlite"
    with sqlite3.connect(path) as db:  # the schema of earlier versions: vectors only
        db.execute("CREATE TABLE vectors (model TEXT NOT NULL, text BLOB NOT NULL, vector BLOB NOT NULL, "
                   "PRIMARY KEY (model, text)) WITHOUT ROWID")
        rows = [("m", text_key(t), np.full(3, 2.0, dtype=np.float32).tobytes()) for t in ("a", "b", "c")]
        rows.append(("m", text_key("d"), np.full(7, 2.0, dtype=np.float32).tobytes()))
        db.executemany("INSERT INTO vectors VALUES (?, ?, ?)", rows)
    store = EmbeddingStore(path)
    assert store.length("m") == 3 and sorted(store.get("m", ["a", "b", "c", "d"])) == ["a", "b", "c"]
    assert store.unusable == 1
