"""Which process owns a lock or a run, and whether that process is gone (so what it left behind is stale)."""
from __future__ import annotations

import os
import socket


def this_process() -> tuple[str, str]:
    """(host, pid) of the running process."""
    return socket.gethostname(), str(os.getpid())


def gone(host: str, pid: str) -> bool:
    """True only when the owner ran on this machine and no process with its pid exists any more. Another machine's
    process, an unreadable pid or one we may not signal: we cannot tell, so it counts as alive."""
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError):
        return False
    return False
