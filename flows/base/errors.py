"""User errors out as one line and exit 2: a problem the user can fix (data, LLM endpoint, a store or the disk,
Prefect's API) ends the run with one sentence saying what to do; the traceback goes to the run's log file only."""
from __future__ import annotations

import errno
import logging
import re
import sqlite3
import sys
from typing import Any, Callable, Iterator

from flows.orchestration.server import OrchestrationError
from flows.base.store_checks import PLACES, StoreError, store_of
from opi.data import DataError
from opi.embeddings.local import ModelUnavailable
from opi.llm.faults import LLMError
from opi.retrievers.base import RetrievalTooSlow, ScoresUnusable, VectorStoreUnavailable
from opi.sqlite_file import AGAIN, StoreFault, sqlite_problem

log = logging.getLogger("opi")
EXIT_USER_ERROR = 2
DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}
FULL = {errno.ENOSPC, errno.EDQUOT}
STORE_NAMES = {"paths.cache_dir": "the stage cache", "paths.llm_cache": "the LLM call cache",
               "paths.embedding_store": "the embedding store", "tracking.tracking_uri": "the MLflow store",
               "tracking.artifact_location": "the MLflow artifacts"}
_COMPOSED: list[bool] = []  # set once Hydra has composed a configuration and handed it to OPI
_LAST_ERROR: list[str] = []  # the last error line OPI said in this process (``keep_last_error``)


class _LastError(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        _LAST_ERROR[:] = [record.getMessage()]


def keep_last_error() -> None:
    """Remember the last error line OPI says, for what closes the process's runs (a failed sweep says why)."""
    if not any(isinstance(h, _LastError) for h in log.handlers):
        log.addHandler(_LastError(logging.ERROR))


def last_error() -> str | None:
    return _LAST_ERROR[0] if _LAST_ERROR else None


class CommandError(Exception):
    """A command's argument or a store's state that its user can fix (a sweep id the store does not have): said as
    it is, in one line."""


def composed() -> None:
    _COMPOSED.append(True)


def was_composed() -> bool:
    return bool(_COMPOSED)


def explained(err: BaseException) -> str | None:
    """The one line a user error ends the run with; None for anything else (a bug: its traceback is shown)."""
    if isinstance(err, (CommandError, RetrievalTooSlow, ModelUnavailable, VectorStoreUnavailable)):
        return str(err)
    if isinstance(err, ScoresUnusable):
        return f"retriever problem: {err}"
    if isinstance(err, DataError):
        return f"dataset problem: {err}"
    if isinstance(err, LLMError):
        return f"LLM endpoint problem: {err}"
    if isinstance(err, StoreError):
        return f"cannot write results: {err}"
    if isinstance(err, OrchestrationError):
        return f"Prefect problem: {err}"
    return store_problem(err)


def store_problem(err: BaseException) -> str | None:
    """The line for a store or disk that failed during the work, wherever in ``err``'s chain (SQLAlchemy and
    MLflow wrap SQLite's errors; a worker process hands back only the text): the store by name and path, what
    happened and the next step; None when it is none (a bug)."""
    chain = list(causes(err))
    for cause in chain:
        if isinstance(cause, StoreFault):
            return f"cannot write results: {cause}"
    for cause in chain:
        if isinstance(cause, OSError) and not isinstance(cause, StoreError) and cause.errno in DISK_ERRORS:
            setting = store_of(cause.filename) or writer_of(cause)
            file = cause.filename or (PLACES[setting] if setting in PLACES else "a file")
            where = f" in {STORE_NAMES[setting]} ({setting})" if setting else ""
            step = "free some space on that disk" if cause.errno in FULL else "make it writable again"
            return f"cannot write results: {cause.strerror} ({file}){where}: {step}, {AGAIN}"
    for cause in chain:
        problem = sqlite_problem(cause) if from_sqlite(cause) else None
        if problem:
            happened, step = problem
            return (f"cannot write results: {mlflow_store()}: {happened} ({first_line(cause)}): "
                    f"{step or 'move it away (a new store is made) or restore it from a backup'}")
    return None


# the code that writes each store, by a part of its file's path: names the store of an error without a file name
# (a write to a file already open: ``f.write`` says only "No space left on device")
WRITERS = {"flows/orchestration/cache": "paths.cache_dir", "mlflow/store/artifact": "tracking.artifact_location",
           "mlflow/store/": "tracking.tracking_uri"}


def writer_of(err: BaseException) -> str | None:
    """The setting of the store whose code was writing when ``err`` was raised (the innermost such frame)."""
    frames, tb = [], err.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename.replace("\\", "/"))
        tb = tb.tb_next
    for filename in reversed(frames):
        for part, setting in WRITERS.items():
            if part in filename:
                return setting
    return None


def causes(err: BaseException) -> Iterator[BaseException]:
    """``err`` and what it was raised from (``raise ... from``, as SQLAlchemy and MLflow wrap SQLite's errors), each
    once; not what it was raised while handling: a bug in a handler is a bug."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__


def from_sqlite(err: BaseException) -> bool:
    """SQLite's own error, or one SQLAlchemy or MLflow made of it (OPI's own stores raise ``StoreFault``: this is
    MLflow's store)."""
    if isinstance(err, sqlite3.Error):
        return True
    return type(err).__module__.split(".")[0] in ("sqlalchemy", "mlflow") and "sqlite3." in str(err)


def first_line(err: BaseException) -> str:
    """SQLite's own words in ``err`` (SQLAlchemy quotes them after ``(sqlite3.OperationalError)``)."""
    text = str(err)
    quoted = re.search(r"\(sqlite3\.\w+\) ([^\n]+)", text)
    return quoted.group(1).strip() if quoted else (text.strip().splitlines() or [type(err).__name__])[0]


def mlflow_store() -> str:
    path = PLACES.get("tracking.tracking_uri")
    return f"the MLflow store {path} (tracking.tracking_uri)" if path else "the MLflow store (tracking.tracking_uri)"


def run_or_explain(work: Callable[..., Any], *args: Any) -> Any:
    """Run ``work``; a user error ends the run with one line and exit 2."""
    try:
        return work(*args)
    except Exception as err:
        message = explained(err)
        if message is None:
            raise
        keep_traceback_in_log_file()
        log.error("%s", message)
    sys.exit(EXIT_USER_ERROR)


def keep_traceback_in_log_file() -> None:
    """The exception being handled, written to the log files (Hydra's ``<job>.log``), not to the console."""
    record = log.makeRecord(log.name, logging.DEBUG, __file__, 0, "traceback of the error below", (), sys.exc_info())
    for handler in [*log.handlers, *logging.getLogger().handlers]:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)
