"""The stage cache's files: a Prefect file-system block that writes each file under a temporary name of its own and
renames it into place (a crash or a full disk never leaves a partial file under a final name, two writers never
share a temporary file), with a checksum, so that an entry damaged later (a file cut short, a disk error) is found
when it is read: warned about, removed, and computed again, never a traceback.

Paths are kept relative to the block's folder (Prefect records the key itself as the result's storage key:
``prefect_adapter.RelativeResultKeys``), so a cache folder moved or copied elsewhere is still read. The metadata files (``keys/``)
know the results folder: an entry whose result is damaged reads as absent, so Prefect computes it again.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from prefect.filesystems import WritableFileSystem

from flows.orchestration.files import DamagedEntry, unseal, write_atomically, seal
from flows.orchestration.prefect_adapter import RelativeResultKeys

log = logging.getLogger("opi")


class CacheFileSystem(RelativeResultKeys, WritableFileSystem):
    """Files under ``basepath``, written atomically and checksummed. ``results``: for a metadata folder, the folder
    of the results it describes (an entry with a damaged result reads as absent)."""

    _block_type_slug = "opi-cache-file-system"
    basepath: str
    results: Optional[str] = None

    def path(self, key: str) -> Path:
        """Where ``key`` lives: keys are file names; an absolute path written by an older cache (or before the folder
        moved) is read by its name, under this folder."""
        name = Path(key).name if Path(key).is_absolute() else key
        return Path(self.basepath).expanduser().resolve() / name

    def read_path(self, path: str, _sync: bool | None = None) -> bytes | None:  # Prefect passes _sync
        target = self.path(path)
        try:
            content = unseal(target.read_bytes(), target)
            if self.results is not None:  # a metadata file: its result must be readable too
                result = CacheFileSystem(basepath=self.results).path(path)
                unseal(result.read_bytes(), result)
            return content
        except FileNotFoundError:
            if self.results is None:
                raise
            return None  # Prefect: no such entry
        except (DamagedEntry, OSError) as err:
            if self.results is None:
                raise
            self.forget(path, err)
            return None

    def forget(self, key: str, err: Exception) -> None:
        """Remove a damaged entry (metadata and result), saying so: it is computed again."""
        log.warning("cached result %s is unreadable (%s); computing it again", key, err)
        for folder in (self.basepath, self.results):
            CacheFileSystem(basepath=folder).path(key).unlink(missing_ok=True)

    def write_path(self, path: str, content: bytes, _sync: bool | None = None) -> str:
        target = self.path(path)
        target.parent.mkdir(exist_ok=True, parents=True)
        write_atomically(target, lambda partial: partial.write_bytes(seal(content)))
        return path

    async def aread_path(self, path: str) -> bytes | None:
        return self.read_path(path)

    async def awrite_path(self, path: str, content: bytes) -> str:
        return self.write_path(path, content)
