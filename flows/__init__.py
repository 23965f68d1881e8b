"""Orchestration: Hydra entry points, Prefect flows and MLflow tracking around the plain ``opi`` library.

Importing it sets quiet, offline-friendly defaults (a user's own environment wins). ``-v``/``--verbose`` on a
command line (or ``OPI_VERBOSE=1``) keeps third-party logs, notices and warnings.
"""
import os
import sys
import warnings
from pathlib import Path

from flows.secrets import redact_log_records

VERBOSE = os.environ.get("OPI_VERBOSE") == "1" or any(a in ("-v", "--verbose") for a in sys.argv[1:])

_DEFAULTS = {
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
_QUIET = {
    "PREFECT_LOGGING_LEVEL": "WARNING",  # also Prefect's "Starting temporary server ... See https://..." notice
    # a failed task or flow is reported once: by OPI (user errors, one line) or by Hydra (bugs), not also by Prefect
    "PREFECT_LOGGING_LOGGERS_PREFECT_FLOW_RUNS_LEVEL": "CRITICAL",
    "PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL": "CRITICAL",
    "MLFLOW_LOGGING_LEVEL": "WARNING",  # "Creating initial MLflow database tables..."
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # also silences transformers' "Loading weights" bar
    "TRANSFORMERS_VERBOSITY": "error",
}
for _key, _value in {**_DEFAULTS, **({} if VERBOSE else _QUIET)}.items():
    os.environ.setdefault(_key, _value)

if not VERBOSE:  # notices a user cannot act on
    warnings.filterwarnings("ignore", message=".*langchain-community. is being sunset")
    warnings.filterwarnings("ignore", message="SOCKS support in urllib3 requires")
    warnings.filterwarnings("ignore", message="Failed to create the Prefect home")  # said by flows.stores, clearer
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)

redact_log_records()  # credentials in a URL never reach a log line

# Prefect's temporary server, the local LLM server and the MLflow UI test all live on loopback: never through a proxy
for _key in ("NO_PROXY", "no_proxy"):
    _hosts = [h for h in os.environ.get(_key, "").split(",") if h]
    os.environ[_key] = ",".join(dict.fromkeys([*_hosts, "127.0.0.1", "localhost"]))


def _evaluate_command() -> bool:
    """This process is ``opi-eval`` or ``python -m flows.evaluate``."""
    return Path(sys.argv[0]).name == "opi-eval" or sys.orig_argv[1:3] == ["-m", "flows.evaluate"]


if _evaluate_command():  # Prefect's server boots while the command imports and checks its data (~5 s saved)
    from flows.prefect_runtime import launch_temporary_server

    launch_temporary_server()


def command_start() -> None:
    """What every console command does first: remove ``-v``/``--verbose`` from the command line before Hydra or
    argparse read it (Hydra would refuse it; verbose Hydra runs log at DEBUG with ``hydra.verbose=true``), and name
    this run for its output folders (``OPI_RUN_TAG``, the process id: two runs started in the same second do not
    share a folder; processes this one starts, such as parallel launcher workers, inherit it)."""
    os.environ["OPI_RUN_TAG"] = str(os.getpid())
    if any(a in ("-v", "--verbose") for a in sys.argv[1:]):
        sys.argv = [sys.argv[0], *[a for a in sys.argv[1:] if a not in ("-v", "--verbose")]]
