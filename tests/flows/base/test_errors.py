"""The one line a user error ends a run with (``flows.base.errors``), in-process: each kind of user error with its
prefix and anything else a bug (None); a disk error outside every store named by its file (or "a file"), other
errnos bugs; SQLite's own error text found only in SQLite's (or SQLAlchemy's, MLflow's) errors and only along
``raise ... from``; SQLite's words picked out of SQLAlchemy's message; and ``run_or_explain`` handing back the work's
value, or logging the one line and exiting 2. The stores and disks of a real run are in
``tests/flows/test_stores_and_disks.py``."""
import errno
import logging
import sqlite3

import pytest

from flows.base import errors, store_checks
from flows.base.errors import (AGAIN, EXIT_USER_ERROR, CommandError, causes, explained, first_line,
                               run_or_explain)
from flows.base.store_checks import StoreError
from flows.orchestration.server import OrchestrationError
from opi.data import DataError
from opi.embeddings.local import ModelUnavailable
from opi.llm.faults import LLMError
from opi.retrievers.base import RetrievalTooSlow
from opi.sqlite_file import StoreFault


@pytest.fixture(autouse=True)
def no_stores(monkeypatch):
    """No run's places known (``PLACES`` is filled by ``separate_stores`` in other tests of the process)."""
    places = {}
    monkeypatch.setattr(store_checks, "PLACES", places)
    monkeypatch.setattr(errors, "PLACES", places)


@pytest.mark.parametrize("err, line", [
    (CommandError("no sweep abc in the store"), "no sweep abc in the store"),
    (RetrievalTooSlow("svm would take 3 h"), "svm would take 3 h"),
    (ModelUnavailable("model problem: m"), "model problem: m"),
    (DataError("data.jsonl row 3: no question"), "dataset problem: data.jsonl row 3: no question"),
    (LLMError("http://h/v1 refused the API key"), "LLM endpoint problem: http://h/v1 refused the API key"),
    (StoreError("the stage cache: /c is a file"), "cannot write results: the stage cache: /c is a file"),
    (OrchestrationError("the API does not answer"), "Prefect problem: the API does not answer"),
    (ValueError("bad value"), None),  # DataError and RetrievalTooSlow are ValueErrors; a plain one is a bug
    (KeyError("missing"), None),
])
def test_each_user_error_has_its_line_and_anything_else_is_a_bug(err, line):
    assert explained(err) == line


def test_a_disk_error_outside_every_store_names_its_file_and_other_errnos_are_bugs():
    assert explained(OSError(errno.EACCES, "Permission denied", "/nowhere/x.json")) == (
        f"cannot write results: Permission denied (/nowhere/x.json): make it writable again, {AGAIN}")
    assert explained(OSError(errno.EDQUOT, "Disk quota exceeded")) == (
        f"cannot write results: Disk quota exceeded (a file): free some space on that disk, {AGAIN}")
    assert explained(OSError(errno.EIO, "Input/output error", "/x")) is None
    assert explained(FileNotFoundError(errno.ENOENT, "No such file or directory", "/x")) is None


def test_sqlites_words_are_a_store_problem_only_in_sqlites_errors():
    assert explained(sqlite3.DatabaseError("database disk image is malformed")) == (
        "cannot write results: the MLflow store (tracking.tracking_uri): it is damaged (database disk image is "
        "malformed): move it away (a new store is made) or restore it from a backup")
    assert explained(RuntimeError("database is locked")) is None  # OPI's own code saying it: not SQLite


def test_the_chain_is_followed_along_raise_from_only_each_error_once():
    fault = StoreFault("the embedding store /e.sqlite: its disk is full")
    try:
        try:
            raise fault
        except StoreFault:
            raise RuntimeError("a bug in the handler")  # raised while handling: __context__, not __cause__
    except RuntimeError as err:
        assert explained(err) is None
    wrapped = RuntimeError("the stage failed")
    wrapped.__cause__ = fault
    assert explained(wrapped) == f"cannot write results: {fault}"
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__cause__, second.__cause__ = second, first  # a loop ends
    assert list(causes(first)) == [first, second]


def test_the_first_line_is_sqlites_own_words():
    assert first_line(RuntimeError("(sqlite3.OperationalError) database is locked\n[SQL: UPDATE runs]")) == (
        "database is locked")
    assert first_line(RuntimeError("  disk I/O error\nmore")) == "disk I/O error"
    assert first_line(RuntimeError("")) == "RuntimeError"


def test_run_or_explain_hands_back_the_value_or_ends_with_one_line_and_exit_2(caplog):
    assert run_or_explain(lambda a, b: a * b, 6, 7) == 42

    def bad_data():
        raise DataError("data.jsonl row 3: no question")

    with caplog.at_level(logging.ERROR, logger="opi"), pytest.raises(SystemExit) as stopped:
        run_or_explain(bad_data)
    assert stopped.value.code == EXIT_USER_ERROR == 2
    assert [r.getMessage() for r in caplog.records] == ["dataset problem: data.jsonl row 3: no question"]
