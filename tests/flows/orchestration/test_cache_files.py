"""The stage cache's files are written whole or not at all (a full disk mid-write leaves no partial file under a
final name, and an older complete file stays readable), and a file damaged later is found when read."""
import errno
from pathlib import Path

import pytest
from prefect.results import ResultStore

from flows.orchestration.cache import cache_layout
from flows.orchestration.cache_files import CacheFileSystem, DamagedEntry


def result_store(cache_dir: str) -> ResultStore:
    """Prefect's store over the stage cache's layout, as a cached task writes and reads its results."""
    results, keys, locks = cache_layout(cache_dir)
    return ResultStore(result_storage=results, metadata_storage=keys, lock_manager=locks)


def full_disk_after(limit: int, monkeypatch) -> None:
    """Writes fail like a full disk: the first ``limit`` bytes land, then ENOSPC."""
    def write_bytes(self: Path, data: bytes) -> int:
        with open(self, "wb") as handle:
            handle.write(data[:limit])
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_bytes", write_bytes)


def test_a_full_disk_leaves_neither_a_partial_file_nor_a_temporary_one(tmp_path, monkeypatch):
    storage = CacheFileSystem(basepath=str(tmp_path))
    storage.write_path("kept", b"complete result")
    full_disk_after(3, monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        storage.write_path("new", b"a result that does not fit")
    with pytest.raises(OSError):
        storage.write_path("kept", b"a newer result that does not fit")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    assert storage.read_path("kept") == b"complete result"


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


def test_a_file_damaged_after_it_was_written_is_found_when_read(tmp_path):
    storage = CacheFileSystem(basepath=str(tmp_path))
    storage.write_path("entry", b"a stage result")
    assert storage.read_path("entry") == b"a stage result"
    (tmp_path / "entry").write_bytes((tmp_path / "entry").read_bytes().replace(b"stage", b"stale"))
    with pytest.raises(DamagedEntry, match="checksum"):
        storage.read_path("entry")


def test_an_entry_whose_result_is_damaged_reads_as_absent_and_is_removed(tmp_path, caplog):
    store = result_store(str(tmp_path))
    store.write(key="entry", obj={"bertsim": 0.5})
    assert store.exists("entry")
    (tmp_path / "results" / "entry").write_bytes(b"garbage")
    assert not store.exists("entry")  # Prefect then computes it again
    assert "cached result entry is unreadable" in caplog.text
    assert not (tmp_path / "results" / "entry").exists() and not (tmp_path / "keys" / "entry").exists()
