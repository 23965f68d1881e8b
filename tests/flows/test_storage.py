"""The stage cache's storage writes each file whole or not at all (a full disk mid-write leaves no partial file
under a final name, and an older complete file stays readable)."""
import errno
from pathlib import Path

import pytest

from flows.storage import AtomicLocalFileSystem
from flows.tasks import result_store


def full_disk_after(limit: int, monkeypatch) -> None:
    """Writes fail like a full disk: the first ``limit`` bytes land, then ENOSPC."""
    def write_bytes(self: Path, data: bytes) -> int:
        with open(self, "wb") as handle:
            handle.write(data[:limit])
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_bytes", write_bytes)


def test_a_full_disk_leaves_neither_a_partial_file_nor_a_temporary_one(tmp_path, monkeypatch):
    storage = AtomicLocalFileSystem(basepath=str(tmp_path))
    storage.write_path("kept", b"complete result")
    full_disk_after(3, monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        storage.write_path("new", b"a result that does not fit")
    with pytest.raises(OSError):
        storage.write_path("kept", b"a newer result that does not fit")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    assert (tmp_path / "kept").read_bytes() == b"complete result"


def test_the_cache_store_keeps_no_partial_record_after_a_full_disk(tmp_path, monkeypatch):
    store = result_store(str(tmp_path))
    store.write(key="whole", obj={"metrics": {"bertsim": 0.5}})
    full_disk_after(10, monkeypatch)
    with pytest.raises(OSError):
        store.write(key="cut", obj={"metrics": {"bertsim": 0.25}})
    monkeypatch.undo()
    assert not store.exists("cut")
    assert store.read("whole").result == {"metrics": {"bertsim": 0.5}}
    files = [p for folder in ("results", "keys") for p in (tmp_path / folder).iterdir()]  # locks/ are empty by design
    assert len(files) == 2 and all(p.stat().st_size > 0 and "partial" not in p.name for p in files)
