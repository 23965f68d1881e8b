"""The stores a run writes, checked before any work: SQLite files pass quick_check, read without creating anything."""
import sqlite3
from pathlib import Path

import pytest

from flows.base.store_checks import StoreError, intact_sqlite, writable_folder


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


def test_a_tracking_server_that_does_not_answer_is_one_line_and_one_that_answers_anything_passes():
    import http.server
    import threading

    from flows.base import store_checks
    from opi.memory import MEMORY
    from tests.helpers.cli import free_port

    with MEMORY.isolated(store_checks.ANSWERED):
        dead = free_port()
        assert store_checks.tracking_server_problem(f"http://127.0.0.1:{dead}") == (
            f"tracking.tracking_uri=http://127.0.0.1:{dead}: no MLflow tracking server answers there ([Errno 111] "
            "Connection refused): start it, or point the setting at the running one")
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)  # 501 to a GET
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            answered = f"http://127.0.0.1:{server.server_port}"
            assert store_checks.tracking_server_problem(answered, "--tracking-uri") is None
        finally:
            server.shutdown()
        assert store_checks.tracking_server_problem("sqlite:///mlruns/mlflow.db") is None  # no server to ask


def test_a_folder_on_a_kernel_file_system_is_said_to_be_on_no_disk():
    # root may write under /proc, whose size is 0: it was told "only 0 MB free" and to free some space
    with pytest.raises(StoreError, match=r"^--out: /proc is on no disk \(a file system of the kernel's"):
        writable_folder(Path("/proc/nope"), "--out")
