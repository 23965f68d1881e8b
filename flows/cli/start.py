"""What every command does around its work (importing ``flows`` does none of it):

- ``start_command``, first thing: quiet, offline-friendly environment defaults (a user's own environment wins),
  third-party notices a user cannot act on filtered, credentials redacted from every log record, loopback kept off
  any proxy, ``-v``/``--verbose`` taken off the command line (it keeps third-party logs, notices and warnings), and
  for commands that always run a flow (``opi-train-classifier``, ``opi-nightly-sweep``) Prefect's temporary server
  booting while the command imports and checks its data (``opi-eval`` starts it once a result is not kept:
  ``flows.orchestration.server``). Prefect and MLflow read the environment when they are imported, so commands import
  their work after this.
- ``run_command``: the work, with user errors as one line and exit 2 (``flows.base.errors``), a stop signal as one
  line and 128 + its number (Ctrl-C 130, SIGTERM 143, SIGHUP 129: runs closed as KILLED), and the servers this
  process started stopped on every way out.
"""
from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import warnings
from typing import Any, Callable, NoReturn

from flows.orchestration.server import start_temporary_server, stop_temporary_server
from flows.base.errors import (EXIT_USER_ERROR, explained, keep_last_error, keep_traceback_in_log_file,
                               was_composed)
from flows.run.redaction import redact_log_records
from opi.interrupt import native_work_abandoned, stop_requests
from opi.schemas import TrackingConfig
from opi.secrets import keep_out, secret_values, setting_problem

log = logging.getLogger("opi")
ENVIRONMENT = {
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
QUIET = {
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # a failed task or flow is reported once: by OPI (user errors, one line) or by Hydra (bugs), not also by Prefect
    "PREFECT_LOGGING_LOGGERS_PREFECT_FLOW_RUNS_LEVEL": "CRITICAL",
    "PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL": "CRITICAL",
    "MLFLOW_LOGGING_LEVEL": "WARNING",  # "Creating initial MLflow database tables..."
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # "View run ... at" per run, with a tracking server
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # also silences transformers' "Loading weights" bar
    "TRANSFORMERS_VERBOSITY": "error",
}
QUIET_WARNINGS = (".*langchain-community. is being sunset", "SOCKS support in urllib3 requires",
                  "Failed to create the Prefect home")  # the last is said by the store checks, more clearly
QUICK_EXITS = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion", "-sc")
VERBOSE_FLAGS = ("-v", "--verbose")
_SIGNALLED: list[int] = []  # the stop signal received, if any
_EXIT_STATUS: list[int | None] = [None]  # the status the command's work ended with; None: a traceback escaped
# SIGTERM (a scheduler, kill) and SIGHUP (the terminal closed) end the run as Ctrl-C does, with 128 + the number
STOP_SIGNALS = {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP (the terminal closed)"}
RESUMES = "finished stages and configurations are kept; the same command resumes"


def start_command(early_prefect: bool = False) -> None:
    """Set this process up for a command; ``early_prefect``: start booting Prefect's temporary server now. A secret
    on the command line is refused first, before anything could write it down."""
    problem = command_line_problem(sys.argv[1:])
    if problem:
        print(f"invalid configuration: {problem}", file=sys.stderr)
        raise SystemExit(EXIT_USER_ERROR)
    if any(a in VERBOSE_FLAGS for a in sys.argv[1:]):
        os.environ["OPI_VERBOSE"] = "1"  # processes this one starts (the nightly sweep) inherit it
        sys.argv = [sys.argv[0], *[a for a in sys.argv[1:] if a not in VERBOSE_FLAGS]]
    verbose = os.environ.get("OPI_VERBOSE") == "1"
    # output folders are named after this run (two runs started in the same second do not share one); processes
    # this one starts, such as parallel launcher workers, inherit it
    os.environ["OPI_RUN_TAG"] = str(os.getpid())
    for key, value in {**ENVIRONMENT, **({} if verbose else QUIET)}.items():
        os.environ.setdefault(key, value)
    if not verbose:
        for message in QUIET_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
    keep_out(*secret_values().values())  # keys in variables named as keys: masked wherever a server echoes one
    redact_log_records()
    keep_last_error()
    for key in ("NO_PROXY", "no_proxy"):  # Prefect's server, the local LLM server, the UI test: all on loopback
        hosts = [h for h in os.environ.get(key, "").split(",") if h]
        os.environ[key] = ",".join(dict.fromkeys([*hosts, "127.0.0.1", "localhost"]))
    for number in STOP_SIGNALS:
        signal.signal(number, stopped_by_signal)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where it is ignored (nohup, `cmd &`)
        signal.signal(signal.SIGINT, interrupted)
    atexit.register(end_without_native_work)  # registered before the libraries' own hooks: runs after them
    if early_prefect and not any(a.split("=")[0] in QUICK_EXITS for a in sys.argv[1:]):
        start_temporary_server()  # boots while the command imports, checks its data and composes (~5 s saved)


def command_line_problem(arguments: list[str]) -> str | None:
    """A setting on the command line that would put a secret into what the run writes (``opi.secrets``): Hydra
    overrides (``llm.api_key_env=...``, ``+llm.api_key=...``) and ``--option=value`` alike."""
    for argument in arguments:
        if "=" not in argument:
            continue
        key, value = argument.split("=", 1)
        key = key.lstrip("+~-").split("@")[0]
        problem = setting_problem(key, value.strip("'\""))
        if problem:
            return problem
    return None


def stopped_by_signal(signum: int, frame: Any) -> None:
    """SIGTERM or SIGHUP ends the run like Ctrl-C does: waits on LLM requests and embedding end, and the process
    exits through its exit handlers (servers stopped, MLflow runs closed as KILLED) with 128 + the signal's number.
    A second signal while the first unwinds is not raised again (it would interrupt the cleanup)."""
    stop_requests()
    if _SIGNALLED:
        return
    _SIGNALLED.append(signum)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C after a hang-up: the same stop
    sys.exit(128 + signum)


def interrupted(signum: int, frame: Any) -> None:
    """Ctrl-C: KeyboardInterrupt, once; a second Ctrl-C while the first unwinds (runs closed, servers stopped) is
    not raised again, so the cleanup finishes."""
    stop_requests()
    if _SIGNALLED:
        return
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt


def end_without_native_work() -> None:
    """The last exit hook: a command whose work ended with a known status ends here with it, after Python's exit
    handlers (MLflow runs closed, traces flushed, servers stopped). A process that stopped waiting for native work
    still running in a thread (an SVM fit abandoned at SIGTERM or Ctrl-C) must: the C runtime's exit unloads
    libraries under that thread (a segfault). One that finished needs none of the interpreter's teardown of its
    modules, 1.2 s of an ``opi-eval`` that read its result from the cache. An exception that escaped the command
    (a traceback) is left to Python's own exit."""
    status = _EXIT_STATUS[0]
    if native_work_abandoned() or status is not None:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1 if status is None else status)


def exit_status(code: Any) -> int:
    """The process status ``sys.exit(code)`` gives."""
    return 0 if code is None else code if isinstance(code, int) else 1


def run_command(work: Callable[[], Any]) -> Any:
    """Run a command's work. Hydra reports a configuration it cannot compose (``retriever=bm26``, a typo in a key)
    in one line and exits 1: as every other user error, that is exit 2 here."""
    try:
        result = work()
        _EXIT_STATUS[0] = 0
        return result
    except SystemExit as err:
        if _SIGNALLED:
            stopped(_SIGNALLED[0])
        if err.code == 1 and not was_composed():
            _EXIT_STATUS[0] = EXIT_USER_ERROR
            raise SystemExit(EXIT_USER_ERROR) from None
        _EXIT_STATUS[0] = exit_status(err.code)
        raise
    except KeyboardInterrupt:
        stopped(signal.SIGINT)
    except Exception as err:
        if _SIGNALLED:  # what the signal interrupted failed on its way out (a library wrapping SystemExit)
            stopped(_SIGNALLED[0])
        if explained(err) is None:
            raise
        keep_traceback_in_log_file()
        log.error("%s", explained(err))
        _EXIT_STATUS[0] = EXIT_USER_ERROR
        raise SystemExit(EXIT_USER_ERROR) from None
    finally:
        stop_temporary_server()


def stopped(signum: int) -> NoReturn:
    """The end of a run stopped by a signal: one line, exit 128 + its number (130 Ctrl-C, 143 SIGTERM, 129
    SIGHUP)."""
    name = "Ctrl-C" if signum == signal.SIGINT else STOP_SIGNALS[signum]
    log.error("stopped by %s: %s", name, RESUMES)
    _EXIT_STATUS[0] = 128 + signum
    raise SystemExit(128 + signum) from None


def console_logging(*noisy: str) -> None:
    """Logging for the argparse commands (opi-annotate, opi-report, opi-nightly, opi-label): OPI's messages at
    INFO, also where Prefect has configured the root logger first (its handler then prints them); ``noisy``
    libraries at WARNING."""
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
    log.setLevel(logging.INFO)
    for name in ("mlflow", "alembic", *noisy):
        logging.getLogger(name).setLevel(logging.WARNING)


def add_store_arguments(parser) -> None:
    """Where the MLflow runs are: the tracking config's defaults."""
    defaults = TrackingConfig()
    parser.add_argument("--tracking-uri", default=defaults.tracking_uri)
    parser.add_argument("--experiment", default=defaults.experiment)
