"""Servers a run starts (Prefect's temporary server, the local LLM server) live in sessions of their own, so a
terminal's Ctrl-C or hang-up reaches only the run, which then stops them itself; and each ends when the run that
started it is gone, however it went (kill -9 included): it watches its parent.

``python -m opi.processes <module> [args...]`` runs ``python -m <module> [args...]`` under that watch (for servers
whose code is not ours); ``orphans`` finds servers of this user whose run is gone (left by a version without the
watch, or a watch that could not act), for the next run to stop and say so.
"""
from __future__ import annotations

import os
import runpy
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable

WATCHED = ("-m", "opi.processes")  # how a watched server's command line starts (after the interpreter)
STARTED_BY = "OPI_STARTED_BY"  # the pid of the run that started a server, in the server's environment


def watched_command(module: str, *arguments: str) -> list[str]:
    """The command line that runs ``python -m module arguments`` under the parent watch."""
    return [sys.executable, *WATCHED, module, *arguments]


def environment_for_child(environment: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a server this process starts: ``environment`` (default: this process's) and this
    process's pid, which the server's watch compares with its parent (``started_by``)."""
    return {**(os.environ if environment is None else environment), STARTED_BY: str(os.getpid())}


def started_by() -> int:
    """The pid of the run that started this process, as the run said (``STARTED_BY``): the parent read now may
    already be init, when the run was killed while this process was starting. Else the parent now."""
    given = os.environ.pop(STARTED_BY, "")
    return int(given) if given.isdigit() else os.getppid()


def parent_gone(parent: int) -> bool:
    """Has this process lost the parent it started with (``parent``)? It is then adopted by init or a subreaper."""
    return os.getppid() != parent


def watch_parent(on_gone: Callable[[], None], interval: float = 0.5) -> threading.Thread:
    """Call ``on_gone`` (in a daemon thread) once the process that started this one has ended."""
    parent = started_by()

    def watch() -> None:
        while not parent_gone(parent):
            time.sleep(interval)
        on_gone()
    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread


def terminate_self(grace: float = 10.0) -> None:
    """SIGTERM to this process (the server's own handler shuts it down), SIGKILL if it is still here after
    ``grace`` seconds."""
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace)
    os.kill(os.getpid(), signal.SIGKILL)


def orphaned(parent: int) -> bool:
    """A server whose starting run is gone: adopted by init, or by a subreaper that is not a Python process."""
    if parent == 1:
        return True
    try:
        return b"python" not in Path(f"/proc/{parent}/cmdline").read_bytes()
    except OSError:
        return True


def orphans(signature: tuple[str, ...], environment: dict[str, str] | None = None) -> list[int]:
    """Processes of this user whose command line holds ``signature`` (consecutive arguments), whose starting run is
    gone, and whose environment has every ``environment`` item."""
    wanted = b"\0".join(part.encode() for part in signature)
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if wanted not in (proc / "cmdline").read_bytes() or proc.stat().st_uid != os.getuid():
                continue
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            variables = dict(v.split(b"=", 1) for v in (proc / "environ").read_bytes().split(b"\0") if b"=" in v)
        except (OSError, ValueError):
            continue
        if orphaned(parent) and all(variables.get(k.encode(), b"") == v.encode()
                                    for k, v in (environment or {}).items()):
            found.append(int(proc.name))
    return found


def stop(pids: list[int], grace: float = 5.0) -> list[int]:
    """SIGTERM to each of ``pids``, SIGKILL to those still alive after ``grace`` seconds; the pids signalled."""
    stopped = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            stopped.append(pid)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + grace
    while stopped and time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in stopped):
        time.sleep(0.1)
    for pid in stopped:
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
    return stopped


def main() -> None:
    module, *arguments = sys.argv[1:]
    watch_parent(terminate_self)
    sys.argv = [module, *arguments]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
