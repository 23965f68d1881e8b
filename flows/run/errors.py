"""User errors out as one line and exit 2: a problem the user can fix (data, LLM endpoint, a store or the disk,
Prefect's API) ends the run with one sentence saying what to do; the traceback goes to the run's log file only."""
from __future__ import annotations

import errno
import logging
import sys
from typing import Any, Callable

from flows.orchestration.server import OrchestrationError
from flows.run.store_checks import StoreError
from opi.data import DataError
from opi.llm.faults import LLMError
from opi.retrievers.base import RetrievalTooSlow

log = logging.getLogger("opi")
EXIT_USER_ERROR = 2
DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}
_COMPOSED: list[bool] = []  # set once Hydra has composed a configuration and handed it to OPI


class CommandError(Exception):
    """A command's argument or a store's state that its user can fix (a sweep id the store does not have): said as
    it is, in one line."""


def composed() -> None:
    _COMPOSED.append(True)


def was_composed() -> bool:
    return bool(_COMPOSED)


def explained(err: BaseException) -> str | None:
    """The one line a user error ends the run with; None for anything else (a bug: its traceback is shown)."""
    if isinstance(err, (CommandError, RetrievalTooSlow)):
        return str(err)
    if isinstance(err, DataError):
        return f"dataset problem: {err}"
    if isinstance(err, LLMError):
        return f"LLM endpoint problem: {err}"
    if isinstance(err, StoreError):
        return f"cannot write results: {err}"
    if isinstance(err, OrchestrationError):
        return f"Prefect problem: {err}"
    if isinstance(err, OSError) and err.errno in DISK_ERRORS:
        return (f"cannot write results: {err.strerror} ({err.filename or 'a file'}): free some space or fix the "
                "permissions, then run the same command again (finished stages are kept)")
    return None


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
