"""Prefect's API for a command's flows.

Without ``PREFECT_API_URL``, the command runs its own temporary server: ``prefect server start`` (Prefect's public
command: API only, no UI, no background services) on a free 127.0.0.1 port, one per command, stopped on every exit
path. It is started once the command knows a flow will run: ``opi-eval`` when a configuration's result is not kept
(a command that only reads kept results starts none: a boot costs ~0.8 CPU-seconds beside it), so its boot
overlaps importing Prefect and loading the embedding model; ``opi-train-classifier`` and ``opi-nightly-sweep``
first thing, since they always run one. It runs in a session of its own, so a
terminal's Ctrl-C or hang-up reaches only the command (which then stops it), and it ends by itself when the command
is gone (``opi.processes``). Servers boot one at a time on a Prefect home (each migrates the home's database as it
starts). One left behind by a killed run of an older version is stopped by the next. With
``PREFECT_API_URL`` set by the user, that server is checked to answer. Either problem is one ``OrchestrationError``.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from opi.health import answers
from opi.processes import WATCHED, environment_for_child, orphans, stop, watched_command

log = logging.getLogger("opi")
SERVER_COMMAND = ("prefect", "server", "start")
STARTUP_TIMEOUT = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"  # Prefect's own setting for its temporary server


class OrchestrationError(RuntimeError):
    """Prefect's API cannot be reached or its temporary server cannot start."""


@dataclass
class TemporaryServer:
    """This process's temporary server: its address, the thread that boots it, the process, and what went wrong."""

    url: str
    port: int
    boot: threading.Thread | None = None
    process: subprocess.Popen | None = None
    failure: str | None = None
    orphans_stopped: int = 0
    exiting: bool = False
    # the environment it starts with, copied in the main thread: a child spawned from a thread while the main
    # thread changes os.environ can inherit a half-rewritten environment ("OSError: [Errno 14] Bad address")
    environment: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_SERVER: list[TemporaryServer] = []  # at most one per process
_STARTING = threading.Lock()  # a race's configurations start their flows side by side, in threads
_USER_URL: list[str | None] = []  # PREFECT_API_URL as the user gave it, read before we set ours


def prefect_home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()


def user_api_url() -> str | None:
    if not _USER_URL:
        _USER_URL.append(os.environ.get("PREFECT_API_URL") or None)
    return _USER_URL[0]


def uses_temporary_server() -> bool:
    """Flows of this command run against a temporary server this process starts (not one the user pointed at)."""
    return user_api_url() is None


def start_temporary_server() -> None:
    """Start booting this process's temporary server, unless the user named one or it is started already, and point
    ``PREFECT_API_URL`` at it (for Prefect, imported later, and for the processes this one starts)."""
    with _STARTING:
        if uses_temporary_server() and not _SERVER:
            _start()


def _start() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = TemporaryServer(f"http://127.0.0.1:{port}/api", port)
    _SERVER.append(server)
    os.environ["PREFECT_API_URL"] = server.url
    server.environment = dict(os.environ)
    atexit.register(stop_temporary_server)
    server.boot = threading.Thread(target=_boot, args=(server,), name="prefect-server-boot", daemon=True)
    server.boot.start()


def _boot(server: TemporaryServer) -> None:
    try:
        server.orphans_stopped = len(stop_orphaned_servers())
        with _boot_lock():
            with server.lock:
                if server.exiting:
                    return
                output = open(server_log(server.port), "w")
                server.process = subprocess.Popen(
                    watched_command(*SERVER_COMMAND, "--host", "127.0.0.1", "--port", str(server.port), "--no-ui",
                                    "--no-services", "--analytics-off", "--log-level", "ERROR"),
                    stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                    env=environment_for_child(server.environment),
                    start_new_session=True)
                output.close()
            _wait_until_healthy(server)
    except Exception as err:
        server.failure = f"{type(err).__name__}: {str(err)[:200]}"


def server_log(port: int) -> Path:
    """Where a temporary server's own output goes (kept only if it failed): Prefect's shutdown notices and
    tracebacks are not the user's business."""
    return prefect_home() / f"opi-server-{port}.log"


@contextlib.contextmanager
def _boot_lock():
    """One server at a time boots on a Prefect home: each one migrates the home's database as it starts, and two
    commands started together would otherwise migrate it at once ("no such column: flow_runner_type")."""
    home = prefect_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".opi-server-boot.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when this process dies
        yield


def _wait_until_healthy(server: TemporaryServer) -> None:
    deadline = time.monotonic() + float(os.environ.get(STARTUP_TIMEOUT, "120"))
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            last = server_log(server.port).read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"the server process exited with code {server.process.returncode} ({last[0][:150]})")
        if answers(f"{server.url}/health"):
            return
        time.sleep(0.1)
    raise TimeoutError(f"no answer from {server.url} within {STARTUP_TIMEOUT}")


def stop_temporary_server() -> None:
    for server in _SERVER:
        with server.lock:
            server.exiting = True
        process = server.process
        if process is None:
            continue
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if server.failure is None:
            server_log(server.port).unlink(missing_ok=True)


def ensure_api() -> None:
    """Before the first flow: the temporary server booting (started now if it is not already), or the user's server
    answering."""
    if user_api_url() is None:
        start_temporary_server()
    else:
        check_users_api()


def check_users_api() -> None:
    """The user's server (``PREFECT_API_URL``) answers, one line otherwise; nothing without one (the temporary
    server is started when a flow needs it: ``ensure_api``)."""
    url = user_api_url()
    if url is not None and not answers(url.rstrip("/") + "/health", timeout=5):
        raise OrchestrationError(f"Prefect's API at {url} (PREFECT_API_URL) does not answer: start it (prefect "
                                 "server start) or unset PREFECT_API_URL to use a temporary local server")


def stop_orphaned_servers() -> list[int]:
    """Stop temporary servers that a killed run of this user left behind for the same Prefect home (their run
    gone); returns their pids."""
    home = os.environ.get("PREFECT_HOME", "")
    return stop(orphans(("-m", *SERVER_COMMAND), {"PREFECT_HOME": home})
                + orphans((*WATCHED, *SERVER_COMMAND), {"PREFECT_HOME": home}))


@contextlib.contextmanager
def prefect_api(while_booting: Callable[[], Any] | None = None):
    """This command's Prefect API, ready: the temporary server booted (or the user's answering), and Prefect's
    settings pointing at it; against the temporary server, without flow heartbeats (they serve workers we do not
    have, and their thread's 1 s sleep delays every flow's exit). ``while_booting``: work that needs no Prefect,
    done while the temporary server is still starting (on a new Prefect home its database's creation takes ~9 s)
    instead of waiting idle."""
    # not at the top: commands import this module before they set the environment Prefect reads when imported
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    ensure_api()
    if not _SERVER:
        yield
        return
    server = _SERVER[0]
    if while_booting is not None and server.boot.is_alive():
        while_booting()
    server.boot.join()  # a flow must not race the server that is still starting
    if server.failure:
        raise OrchestrationError(f"Prefect's temporary server did not start on 127.0.0.1 ({server.failure}): check "
                                 "that the loopback interface is up, or point PREFECT_API_URL at a running Prefect "
                                 "server")
    if server.orphans_stopped:
        log.info("stopped %d Prefect server(s) left running by an earlier, killed run", server.orphans_stopped)
        server.orphans_stopped = 0
    with temporary_settings(updates={PREFECT_API_URL: server.url, PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def run_flow(flow: Callable[..., Any], *args: Any, while_booting: Callable[[], Any] | None = None) -> Any:
    """Call a flow against this command's Prefect API (``prefect_api``)."""
    with prefect_api(while_booting):
        return flow(*args)
