"""Files written whole or not at all."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Write-then-rename: a run killed mid-write leaves no half file under a final name."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")  # one name per writer
    write(partial)
    os.replace(partial, path)
