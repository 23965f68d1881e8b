"""The stores a run writes, checked before any work: SQLite files pass quick_check, read without creating anything."""
import sqlite3

import pytest

from flows.base.store_checks import StoreError, intact_sqlite


def test_a_database_whose_path_holds_a_hash_is_checked_itself_and_nothing_is_created(tmp_path, monkeypatch):
    folder = tmp_path / "runs#2"
    folder.mkdir()
    database = folder / "a.sqlite"
    database.write_bytes(b"not a database, " * 100)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="is not a readable SQLite database"):
        intact_sqlite(database, "paths.llm_cache", "move it away")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs#2"]  # no stray "runs" database beside it


def test_an_intact_database_passes(tmp_path):
    database = tmp_path / "a.sqlite"
    with sqlite3.connect(database) as connection:
        connection.execute("create table t (x)")
    intact_sqlite(database, "paths.llm_cache", "move it away")
