"""Locks for the stage cache: Prefect's lock-manager protocol on operating-system file locks."""
from __future__ import annotations

import threading
import time
from pathlib import Path

from filelock import FileLock, Timeout


class FileLockManager:
    """Prefect's lock-manager protocol on operating-system file locks (``filelock``): a lock is released by the
    system when its holder process dies, so a killed run leaves no stale lock and a re-run resumes at once.
    ``hold_timeout`` is not needed for that and is ignored."""

    def __init__(self, lock_files_directory: Path):
        self.directory = Path(lock_files_directory)
        self._held: dict[str, tuple[FileLock, str]] = {}
        self._guard = threading.Lock()

    def __getstate__(self) -> dict:  # the task (and its cache policy) travels to Dask workers: locks stay here
        return {"directory": self.directory}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["directory"])

    def _lock(self, key: str) -> FileLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        return FileLock(self.directory / f"{key}.lock", thread_local=False)

    def acquire_lock(self, key: str, holder: str, acquire_timeout: float | None = None,
                     hold_timeout: float | None = None) -> bool:
        lock = self._lock(key)
        try:
            lock.acquire(timeout=-1 if acquire_timeout is None else acquire_timeout)
        except Timeout:
            return False
        with self._guard:
            self._held[key] = (lock, holder)
        return True

    async def aacquire_lock(self, key, holder, acquire_timeout=None, hold_timeout=None) -> bool:
        import asyncio

        return await asyncio.to_thread(self.acquire_lock, key, holder, acquire_timeout, hold_timeout)

    def release_lock(self, key: str, holder: str) -> None:
        with self._guard:
            lock, owner = self._held.get(key, (None, None))
            if owner != holder:
                raise ValueError(f"no lock on {key} held by {holder}")
            del self._held[key]
        lock.release()

    def is_locked(self, key: str) -> bool:
        if key in self._held:
            return True
        probe = self._lock(key)
        try:
            probe.acquire(timeout=0)
        except Timeout:
            return True
        probe.release()
        return False

    def is_lock_holder(self, key: str, holder: str) -> bool:
        return self._held.get(key, (None, None))[1] == holder

    def wait_for_lock(self, key: str, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.is_locked(key):
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    async def await_for_lock(self, key: str, timeout: float | None = None) -> bool:
        import asyncio

        return await asyncio.to_thread(self.wait_for_lock, key, timeout)
