"""The shared SQLite file under OPI's stores (``opi.sqlite_file``), in itself: which of SQLite's error texts are a
store's state (full, read-only, busy, unopenable, I/O, damaged) and which are bugs, which of them mean a disk
refused a new file (only full and read-only, read through a wrapping error), why a file's tables are not the
store's (``foreign``), and a store made on a plain schema: its tables as SQLite reports them, a WAL journal, and a
damaged file refused in one line that names it and is left where it was. The stores built on it (the embedding
store, the LLM call cache) failing during the work are in ``tests/opi/test_store_faults.py``."""
import sqlite3

import pytest

from opi.sqlite_file import FULL, READ_ONLY, SQLiteFile, StoreFault, foreign, refused_by_disk, sqlite_problem

SCHEMA = "CREATE TABLE IF NOT EXISTS items (key TEXT PRIMARY KEY, value BLOB)"
BUSY = "it is busy: another process is writing to it (it is not damaged)"


@pytest.mark.parametrize("text, happened", [
    ("database or disk is full", FULL),
    ("attempt to write a readonly database", READ_ONLY),
    ("Database Is Locked", BUSY),  # SQLite's words, in any case
    ("database table is locked", BUSY),
    ("unable to open database file", "it cannot be opened (its folder was removed or is not writable)"),
    ("disk I/O error", "a disk I/O error (the disk full, removed or made read-only)"),
    ("database disk image is malformed", "it is damaged"),
    ("file is not a database", "it is damaged"),
])
def test_sqlites_error_texts_that_are_a_stores_state(text, happened):
    problem = sqlite_problem(sqlite3.OperationalError(text))
    assert problem is not None and problem[0] == happened
    again = problem[1].endswith("then run the same command again (finished stages are kept)")
    assert (problem[1] == "") if happened == "it is damaged" else again  # damaged: the store says what to do


@pytest.mark.parametrize("text", ["no such table: vectors", "near \"SELEC\": syntax error", "UNIQUE constraint failed"])
def test_any_other_error_is_a_bug_not_a_store_problem(text):
    assert sqlite_problem(sqlite3.OperationalError(text)) is None


def test_only_a_full_or_read_only_disk_refused_a_new_file_read_through_what_wraps_it():
    assert refused_by_disk(sqlite3.OperationalError("database or disk is full"))
    assert refused_by_disk(sqlite3.OperationalError("attempt to write a readonly database"))
    assert not refused_by_disk(sqlite3.OperationalError("database is locked"))  # another process setting it up
    assert not refused_by_disk(sqlite3.OperationalError("disk I/O error"))
    try:  # a StoreFault raised from SQLite's error: the cause decides, not the fault's own words
        raise StoreFault("the store x: it is busy") from sqlite3.OperationalError("database or disk is full")
    except StoreFault as err:
        assert refused_by_disk(err)


def test_why_a_files_tables_are_not_the_stores():
    wanted = {"items": ["key", "value"], "meta": ["name"]}
    assert foreign({}, wanted) is None  # a new, empty file
    assert foreign({"items": ["key", "value"]}, wanted) is None  # an older file, one table still to be made
    assert foreign({"items": ["id", "body"], "runs": ["run_uuid"]}, wanted) == (
        "its table 'items' has the columns id, body")  # a changed table is said before other tables
    others = {name: ["x"] for name in ("t6", "t1", "t5", "t2", "t4", "t3")}
    assert foreign(others, wanted) == "it holds the tables t1, t2, t3, t4, t5 ..."  # sorted, five named
    assert foreign({"runs": ["x"], "items": ["key", "value"]}, wanted) == "it holds the tables runs"


def test_a_store_on_a_plain_schema_has_its_tables_and_a_wal_journal(tmp_path):
    store = SQLiteFile(tmp_path / "sub" / "items.sqlite", SCHEMA, "test store")  # its folder is made
    assert store.tables() == {"items": ["key", "value"]}
    db = store.connection()
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.execute("INSERT INTO items VALUES (?, ?)", ("a", b"1"))
    assert db.execute("SELECT key, value FROM items").fetchall() == [("a", b"1")]
    bug = sqlite3.OperationalError("no such table: nothing")
    assert store.fault(bug) is bug  # a bug stays itself: its traceback is shown


def test_a_damaged_file_is_refused_in_one_line_and_left_where_it_was(tmp_path):
    path = tmp_path / "items.sqlite"
    path.write_bytes(b"not sqlite at all " * 300)
    with pytest.raises(StoreFault) as refused:
        SQLiteFile(path, SCHEMA, "test store")
    assert str(refused.value) == (f"the test store {path}: it is damaged (file is not a database): move it away or "
                                  "delete it (a new one is made)")
    assert path.read_bytes() == b"not sqlite at all " * 300  # not removed: this process did not create it


def test_the_journal_is_asked_again_while_another_process_sets_a_new_file_up():
    import sqlite3

    import pytest

    from opi.sqlite_file import StoreFault, write_ahead

    class Answers:  # a connection whose journal pragma is refused as SQLite refuses it, then accepted
        def __init__(self, refusals, error="database is locked"):
            self.refusals, self.error, self.asked = refusals, error, 0

        def execute(self, statement):
            self.asked += 1
            if self.asked <= self.refusals:
                raise StoreFault("the store: it is busy") from sqlite3.OperationalError(self.error)

    locked = Answers(refusals=3)
    write_ahead(locked)
    assert locked.asked == 4
    with pytest.raises(StoreFault):  # another problem is not waited out
        write_ahead(Answers(refusals=1, error="disk I/O error"))
    forever = Answers(refusals=10**6)
    with pytest.raises(StoreFault):
        write_ahead(forever, patience=0.2)
    assert 2 <= forever.asked <= 10
