"""Running flows against Prefect's temporary local server: boot it early, quietly, own it (one per command,
stopped on every exit path; one left behind by a killed run is stopped by the next), and fail fast with one line
when no Prefect API can be reached."""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

_STARTED: list[bool] = []  # start_prefect_server_early ran in this process
_BOOT: list[threading.Thread] = []
_BOOT_FAILED: list[str] = []
_LAUNCHED: list[subprocess.Popen] = []  # the temporary server launch_temporary_server started
_LAUNCH_LOCK = threading.Lock()
_EXITING: list[bool] = []
_ORPHANS_STOPPED: list[int] = []
SERVER_APP = b"prefect.server.api.server:create_app"
QUICK_EXITS = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion", "-sc")


def launch_temporary_server() -> None:
    """Start Prefect's temporary server now, the way Prefect would start it (same command and settings), and point
    ``PREFECT_API_URL`` at it: it boots (10 s on 2 cores with a new Prefect home, 5 s after) while the command
    imports, checks its data and composes its jobs, where Prefect would start it at the first flow. Left to Prefect
    when ``PREFECT_API_URL`` is set, Prefect is already imported (its settings are read), or the command only
    prints something."""
    if (os.environ.get("PREFECT_API_URL") or "prefect" in sys.modules or _BOOT
            or any(a.split("=")[0] in QUICK_EXITS for a in sys.argv[1:])):
        return
    _ORPHANS_STOPPED.extend(stop_orphaned_servers())  # said once logging is set up (start_prefect_server_early)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    os.environ["PREFECT_API_URL"] = url = f"http://127.0.0.1:{port}/api"
    atexit.register(stop_launched_server)
    _BOOT.append(threading.Thread(target=_launch, args=(port, url), name="prefect-server-launch", daemon=True))
    _BOOT[0].start()


def _launch(port: int, url: str) -> None:
    site_packages = Path(importlib.util.find_spec("prefect").origin).parent.parent  # finds, does not import
    try:
        with _boot_lock():
            with _LAUNCH_LOCK:
                if _EXITING:
                    return
                _LAUNCHED.append(subprocess.Popen(
                    [sys.executable, "-m", "uvicorn", "--app-dir", str(site_packages), "--factory",
                     SERVER_APP.decode(), "--host", "127.0.0.1", "--port", str(port), "--log-level", "error",
                     "--lifespan", "on"],
                    env={**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
                         "PREFECT__SERVER_FINAL": "1"}))
            _wait_until_healthy(_LAUNCHED[0], url)
    except Exception as err:
        _boot_failed(err)


def _boot_failed(err: Exception) -> None:
    _BOOT_FAILED.append(f"{type(err).__name__}: {str(err)[:200]}")


def uses_temporary_server() -> bool:
    """Flows of this command run against a temporary server this process starts (not one the user pointed at)."""
    return bool(_BOOT) or not os.environ.get("PREFECT_API_URL")


def prefect_home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()


@contextlib.contextmanager
def _boot_lock():
    """One server at a time boots on a Prefect home: each one migrates the home's database as it starts, and two
    commands started together would otherwise migrate it at once ("no such column: flow_runner_type")."""
    home = prefect_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".opi-server-boot.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when this process dies
        yield


def stop_launched_server() -> None:
    with _LAUNCH_LOCK:
        _EXITING.append(True)
    for process in _LAUNCHED:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class OrchestrationError(RuntimeError):
    """Prefect's API cannot be reached or its temporary server cannot start."""


def start_prefect_server_early() -> None:
    """Wait in the background for the temporary server ``launch_temporary_server`` started (or, not started yet,
    boot one) while Hydra composes and MLflow imports; with ``PREFECT_API_URL`` set by the user, check that server
    answers instead."""
    if _STARTED:
        return
    _STARTED.append(True)
    launched = bool(_BOOT)  # by launch_temporary_server, at the command's start
    url = os.environ.get("PREFECT_API_URL")
    if url and not launched:
        _check_api(url)
        return
    if not launched:
        _ORPHANS_STOPPED.extend(stop_orphaned_servers())
    if _ORPHANS_STOPPED:
        import logging

        logging.getLogger("opi").info("stopped %d Prefect server(s) left running by an earlier, killed run",
                                      len(_ORPHANS_STOPPED))
    # Prefect's client imports its server's SQLAlchemy models; MLflow's sqlite store configures *all* SQLAlchemy
    # mappers. Importing the models here, whole, before any thread starts, keeps MLflow from meeting them
    # half-defined (seen as "Mapper[Flow(flow)] ... failed to locate a name ('FlowRun')").
    import prefect.server.database.orm_models  # noqa: F401

    if launched:
        return

    def boot():
        try:
            from prefect.client.orchestration import get_client

            with _boot_lock(), get_client(sync_client=True) as client:
                client.api_healthcheck()
        except Exception as err:
            _boot_failed(err)

    _BOOT.append(threading.Thread(target=boot, name="prefect-server-boot", daemon=True))
    _BOOT[0].start()


def _wait_until_healthy(process: subprocess.Popen, url: str) -> None:
    from opi.health import answers

    deadline = time.monotonic() + float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120"))
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server process exited with code {process.returncode}")
        if answers(url.rstrip("/") + "/health"):
            return
        time.sleep(0.1)
    raise TimeoutError(f"no answer from {url} within PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS")


def _check_api(url: str) -> None:
    import httpx

    try:
        httpx.get(url.rstrip("/") + "/health", timeout=5).raise_for_status()
    except httpx.HTTPError as err:
        raise OrchestrationError(f"Prefect's API at {url} (PREFECT_API_URL) does not answer ({type(err).__name__}): "
                                 "start it (prefect server start) or unset PREFECT_API_URL to use a temporary "
                                 "local server") from None


def stop_orphaned_servers() -> list[int]:
    """Stop Prefect temporary servers that a killed run of this user left behind (their parent gone, so adopted
    by init) for the same Prefect home; returns their pids."""
    home = os.environ.get("PREFECT_HOME", "").encode()
    stopped = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if SERVER_APP not in (proc / "cmdline").read_bytes() or proc.stat().st_uid != os.getuid():
                continue
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = dict(v.split(b"=", 1) for v in (proc / "environ").read_bytes().split(b"\0") if b"=" in v)
        except (OSError, ValueError):
            continue
        if orphaned(parent) and environ.get(b"PREFECT_HOME", b"") == home:
            os.kill(int(proc.name), signal.SIGTERM)
            stopped.append(int(proc.name))
    deadline = time.monotonic() + 5
    while stopped and time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in stopped):
        time.sleep(0.1)
    for pid in stopped:
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
    return stopped


def orphaned(parent: int) -> bool:
    """A server whose starting run is gone: adopted by init, or by a subreaper that is not a Python process."""
    if parent == 1:
        return True
    try:
        return b"python" not in Path(f"/proc/{parent}/cmdline").read_bytes()
    except OSError:
        return True


def run_flow(flow: Callable[..., Any], *args: Any) -> Any:
    """Call a flow; against the temporary server, without heartbeats (they serve workers we do not have, and
    their thread's 1 s sleep delays every flow's exit)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    for boot in _BOOT:  # a flow must not race the server that is still starting
        boot.join()
    if _BOOT_FAILED:
        raise OrchestrationError(f"Prefect's temporary server did not start on 127.0.0.1 ({_BOOT_FAILED[0]}): "
                                 "check that the loopback interface is up, or point PREFECT_API_URL at a running "
                                 "Prefect server")
    if os.environ.get("PREFECT_API_URL") and not _LAUNCHED:
        return flow(*args)
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        return flow(*args)
