"""The stage cache's file storage: Prefect's local file system, writing each file under a temporary name of its
own and renaming it into place, so a crash or a full disk never leaves a partial file under a final name and two
writers never share a temporary file."""
from __future__ import annotations

import os
import threading
from pathlib import Path

from prefect.filesystems import LocalFileSystem


class AtomicLocalFileSystem(LocalFileSystem):
    _block_type_slug = "opi-atomic-local-file-system"

    def _write_atomically(self, path: str, content: bytes) -> str:
        target: Path = self._resolve_path(path)
        target.parent.mkdir(exist_ok=True, parents=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}-{threading.get_ident()}.partial")
        try:
            partial.write_bytes(content)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        return str(target)

    def write_path(self, path: str, content: bytes, _sync: bool | None = None) -> str:  # Prefect passes _sync
        return self._write_atomically(path, content)

    async def awrite_path(self, path: str, content: bytes) -> str:
        return self._write_atomically(path, content)
