"""Running flows against Prefect's temporary local server: boot it early, quietly, own it (one per command,
stopped on every exit path; one left behind by a killed run is stopped by the next), and fail fast with one line
when no Prefect API can be reached."""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

_STARTED: list[bool] = []  # start_prefect_server_early ran in this process
_BOOT: list[threading.Thread] = []
_BOOT_FAILED: list[str] = []
SERVER_APP = b"prefect.server.api.server:create_app"


class OrchestrationError(RuntimeError):
    """Prefect's API cannot be reached or its temporary server cannot start."""


def start_prefect_server_early() -> None:
    """Boot Prefect's temporary server in the background while Hydra composes and MLflow imports (~5 s saved);
    with ``PREFECT_API_URL`` set, check that server answers instead."""
    if _STARTED:
        return
    _STARTED.append(True)
    url = os.environ.get("PREFECT_API_URL")
    if url:
        _check_api(url)
        return
    stop_orphaned_servers()
    # Prefect's client imports its server's SQLAlchemy models; MLflow's sqlite store configures *all* SQLAlchemy
    # mappers. Importing the models here, whole, before any thread starts, keeps MLflow from meeting them
    # half-defined (seen as "Mapper[Flow(flow)] ... failed to locate a name ('FlowRun')").
    import prefect.server.database.orm_models  # noqa: F401

    def boot():
        try:
            from prefect.client.orchestration import get_client

            with get_client(sync_client=True) as client:
                client.api_healthcheck()
        except Exception as err:
            _BOOT_FAILED.append(f"{type(err).__name__}: {str(err)[:200]}")

    _BOOT.append(threading.Thread(target=boot, name="prefect-server-boot", daemon=True))
    _BOOT[0].start()


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
    if stopped:
        import logging

        logging.getLogger("opi").info("stopped %d Prefect server(s) left running by an earlier, killed run",
                                      len(stopped))
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
    if os.environ.get("PREFECT_API_URL"):
        return flow(*args)
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        return flow(*args)
