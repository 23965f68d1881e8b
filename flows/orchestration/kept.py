"""Whole results kept under one key (a configuration's result, a report's figures) in ``<cache_dir>/kept``: one
sealed pickle each (``flows.orchestration.files``), read and written without Prefect, so that a command whose
result is kept imports no orchestration. Stage results stay in Prefect's cache (``flows.orchestration.cache``)."""
from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any, Callable

from flows.orchestration.files import seal, unseal, write_atomically

log = logging.getLogger("opi")
FOLDER = "kept"


def kept_path(cache_dir: str, key: str) -> Path:
    return Path(cache_dir).expanduser().resolve() / FOLDER / key


def read_kept(cache_dir: str, key: str) -> Any | None:
    """The result kept under ``key``, or None (also for one left unreadable: it is removed, computed again and
    replaced)."""
    path = kept_path(cache_dir, key)
    try:
        return pickle.loads(unseal(path.read_bytes(), path))
    except FileNotFoundError:
        return None
    except Exception as err:  # cut short, another tool's file, a class that no longer unpickles
        log.warning("cached result %s is unreadable (%s); computing it again", key, err)
        path.unlink(missing_ok=True)
        return None


def keep(cache_dir: str, key: str, value: Any) -> None:
    """Keep ``value`` under ``key`` (same key, same inputs: any writer's value will do, the last one stays)."""
    path = kept_path(cache_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    content = seal(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    write_atomically(path, lambda partial: partial.write_bytes(content))


def recalled(cache_dir: str, key: str, compute: Callable[[], Any]) -> tuple[Any, bool]:
    """The result kept under ``key`` and True, or ``compute()``'s, kept, and False."""
    value = read_kept(cache_dir, key)
    if value is not None:
        return value, True
    value = compute()
    keep(cache_dir, key, value)
    return value, False
