"""What every console entry point does around its work: checked config in, user errors out as one line + exit 2."""
from __future__ import annotations

import errno
import logging
import sys
from typing import Any, Callable

from omegaconf import DictConfig

from opi.schemas import OPIConfig

log = logging.getLogger("opi")
EXIT_USER_ERROR = 2


def console_logging(*noisy: str) -> None:
    """Logging for the argparse commands (opi-annotate, opi-report, opi-nightly): OPI's messages at INFO, also
    where Prefect has configured the root logger first (its handler then prints them); ``noisy`` libraries at
    WARNING."""
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    log.setLevel(logging.INFO)
    for name in ("mlflow", "alembic", *noisy):
        logging.getLogger(name).setLevel(logging.WARNING)


def add_store_arguments(parser) -> None:
    """Where the MLflow runs are: the same defaults as conf/tracking/local.yaml."""
    parser.add_argument("--tracking-uri", default="sqlite:///mlruns/mlflow.db")
    parser.add_argument("--experiment", default="opi")


_COMPOSED = []  # set once Hydra has composed a configuration and handed it to OPI


def composed() -> None:
    _COMPOSED.append(True)


def hydra_command(job: Callable[[], Any]) -> None:
    """Run a ``@hydra.main`` job. Hydra reports a configuration it cannot compose (``retriever=bm26``, a typo in a
    key) in one line and exits 1; as every other user error, that is exit 2 here."""
    try:
        job()
    except SystemExit as err:
        if err.code == 1 and not _COMPOSED:
            raise SystemExit(EXIT_USER_ERROR) from None
        raise
    except KeyboardInterrupt:
        log.error("stopped by Ctrl-C: finished stages and configurations are kept; the same command resumes")
        raise SystemExit(130) from None


def checked(cfg: DictConfig) -> OPIConfig:
    """The typed configuration after every check (exit 2 with the reason otherwise)."""
    from hydra.core.hydra_config import HydraConfig

    from flows.config import typed

    composed()

    overridden = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    try:
        return typed(cfg, overridden)
    except ValueError as err:
        log.error("invalid configuration: %s", err)
        sys.exit(EXIT_USER_ERROR)


def run_or_explain(work: Callable[..., Any], *args: Any) -> Any:
    """Run ``work``; a problem the user can fix (data, LLM endpoint, a store or disk) ends the run with one line
    and exit 2; the traceback goes to the run's log file only, for whoever wants it."""
    from flows.prefect_runtime import OrchestrationError
    from flows.stores import StoreError
    from opi.data import DataError
    from opi.llm.client import LLMError

    try:
        return work(*args)
    except DataError as err:
        message = f"dataset problem: {err}"
    except LLMError as err:
        message = f"LLM endpoint problem: {err}"
    except StoreError as err:
        message = f"cannot write results: {err}"
    except OrchestrationError as err:
        message = f"Prefect problem: {err}"
    except OSError as err:
        if err.errno not in DISK_ERRORS:
            raise
        message = f"cannot write results: {err.strerror} ({err.filename or 'a file'}): free some space or fix " \
                  "the permissions, then run the same command again (finished stages are kept)"
    keep_traceback_in_log_file()
    log.error("%s", message)
    sys.exit(EXIT_USER_ERROR)


DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


def keep_traceback_in_log_file() -> None:
    """The exception being handled, written to the log files (Hydra's ``<job>.log``), not to the console."""
    record = log.makeRecord(log.name, logging.DEBUG, __file__, 0, "traceback of the error below", (), sys.exc_info())
    for handler in [*log.handlers, *logging.getLogger().handlers]:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)
