"""The nightly's sweep, seen in Prefect as part of the nightly flow run.

``run_sweep`` runs ``opi-eval experiment=nightly`` in a child process (``python -m flows.cli.nightly_sweep``: unchanged
work comes from the cache; a sweep that crashes leaves the nightly to say so) and hands it the nightly's Prefect
context, serialized (``prefect.context.serialize_context``). The child enters it (``hydrated_context``, what
Prefect's own task runners do for work in another process), so each configuration's ``opi-evaluate`` flow run is
created as a subflow of the nightly flow run: one tree in the Prefect UI. ``logs_to_prefect`` sends OPI's log lines
(logger ``opi``) to Prefect's run logs, in both processes, under ``serve``, a worker or ``opi-nightly run``: a line
inside a configuration's flow run goes to that run's logs, any other line of the sweep to the nightly's.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from flows.base.errors import CommandError

CONTEXT_ENV = "OPI_NIGHTLY_PREFECT_CONTEXT"  # the file holding the nightly's serialized Prefect context
log = logging.getLogger("opi")


class InRun(logging.Filter):
    """Records made inside a Prefect flow or task run (the API log handler has nowhere to send others)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from prefect.context import FlowRunContext, TaskRunContext

        return bool(getattr(record, "flow_run_id", None) or FlowRunContext.get() or TaskRunContext.get())


@contextlib.contextmanager
def logs_to_prefect(name: str = "opi") -> Iterator[None]:
    """The ``name`` logger's lines in Prefect's run logs while this lasts: Prefect's API log handler on it (unless
    Prefect put one there already: ``PREFECT_LOGGING_EXTRA_LOGGERS``), at INFO if the logger has no level of its
    own (a worker's flow process leaves it at the root's WARNING)."""
    from prefect.logging.handlers import APILogHandler

    logger = logging.getLogger(name)
    level = logger.level
    handler = None if any(isinstance(h, APILogHandler) for h in logger.handlers) else APILogHandler()
    if handler is not None:
        handler.addFilter(InRun())
        logger.addHandler(handler)
    if level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.setLevel(level)
        if handler is not None:
            logger.removeHandler(handler)
            handler.flush()


def run_sweep(overrides: list[str], label: str) -> None:
    """``opi-eval experiment=nightly`` with ``overrides``, its runs labelled ``label``, as subflows of this flow run."""
    import cloudpickle

    command = [sys.executable, "-m", "flows.cli.nightly_sweep", "experiment=nightly", *overrides,
               f"tracking.label={label}"]
    with tempfile.TemporaryDirectory(prefix="opi-nightly-") as folder:
        context = Path(folder) / "prefect-context.pickle"
        context.write_bytes(cloudpickle.dumps(portable_context()))
        code, last = followed(command, {**os.environ, CONTEXT_ENV: str(context)}, Path(folder) / "sweep.log")
    if code != 0:
        raise CommandError(f"the nightly sweep failed (opi-eval exit code {code}): {last}")


def portable_context() -> dict:
    """This flow run's Prefect context, serialized for another process, the nightly flow itself replaced by a
    stand-in of its name: a worker loads the flow from its file (module ``gate``, not ``flows.nightly.gate``), which
    the sweep's process could not import."""
    from prefect import Flow
    from prefect.context import serialize_context

    context = serialize_context()
    parent = context["flow_run_context"].get("flow")
    if parent is not None:
        context["flow_run_context"]["flow"] = Flow(stand_in, name=parent.name)
    return context


def stand_in() -> None:
    """The nightly flow, as the sweep's process knows it (its name, for log lines; never run there)."""


def followed(command: list[str], environment: dict[str, str], log_file: Path) -> tuple[int, str]:
    """Run ``command``, its output passed on to this process's as it comes (through a file: a pipe would also wait
    for any process it started that kept it open); (exit code, its last line that says something). If this process
    is stopped, the command is asked to stop too (SIGTERM: it ends its runs as after Ctrl-C)."""
    with open(log_file, "w") as output, open(log_file) as reader:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                   env=environment)
        try:
            while process.poll() is None:
                sys.stdout.write(reader.read())
                sys.stdout.flush()
                time.sleep(0.2)
            sys.stdout.write(reader.read())
            sys.stdout.flush()
        finally:
            stopped(process)
    return process.returncode, last_said(log_file.read_text(errors="replace"))


def last_said(output: str) -> str:
    """What a failed command's output ends by saying: its last logged error, else its last line that begins a
    message (not an indented detail under one, as Hydra writes ``full_key: ...`` under its error)."""
    lines = [line for line in output.splitlines() if line.strip() and "HYDRA_FULL_ERROR" not in line]
    errors = [line.split("[ERROR] - ", 1)[-1] for line in lines if "[ERROR]" in line]
    starts = [line for line in lines if not line[0].isspace()]
    return (errors or starts or lines or ["no output"])[-1].strip()


def stopped(process: subprocess.Popen) -> None:
    """``process`` ended: asked with SIGTERM, killed if it has not ended within a minute."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=60)
        process.kill()  # nothing, once it has ended
        process.wait()


@contextlib.contextmanager
def nightly_context() -> Iterator[None]:
    """Inside the sweep's process: the nightly's Prefect context, if it handed one over, and OPI's lines sent to
    Prefect."""
    path = os.environ.pop(CONTEXT_ENV, None)  # not for the processes this one starts
    if not path:
        yield
        return
    import cloudpickle
    from prefect.context import hydrated_context

    with hydrated_context(cloudpickle.loads(Path(path).read_bytes())), logs_to_prefect():
        yield

