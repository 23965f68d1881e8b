"""Files written whole or not at all, and sealed with a checksum of their content so that one damaged later (a file
cut short, a disk error, another tool's) is found when it is read."""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Callable

MAGIC = b"OPI-SHA256:"  # then the 64 hex digits of the content's sha256, a newline, the content


class DamagedEntry(ValueError):
    """A sealed file that is not what was written (cut short, overwritten, from another tool)."""


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Write-then-rename: a run killed mid-write leaves no half file under a final name; two writers (processes or
    threads) never share a temporary file."""
    partial = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.partial")
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def seal(content: bytes) -> bytes:
    return MAGIC + hashlib.sha256(content).hexdigest().encode() + b"\n" + content


def unseal(data: bytes, path: Path) -> bytes:
    head, _, content = data.partition(b"\n")
    if not head.startswith(MAGIC) or hashlib.sha256(content).hexdigest().encode() != head[len(MAGIC):]:
        raise DamagedEntry(f"{path}: damaged cache entry (its checksum does not match)")
    return content
