"""The stage cache's locks: a live owner is waited for; a killed owner's lock is free at once (operating-system
file locks die with their holder), so a re-run resumes instead of waiting."""
import os
import signal
import subprocess
import sys
import textwrap

from flows.orchestration.locks import FileLockManager


def test_a_killed_owners_lock_is_free_and_a_live_one_is_respected(tmp_path):
    script = textwrap.dedent(f"""
        import pathlib, sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from flows.orchestration.locks import FileLockManager
        manager = FileLockManager(pathlib.Path({str(tmp_path)!r}))
        assert manager.acquire_lock("stage-key", "them")
        print("locked", flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        ours = FileLockManager(tmp_path)
        assert ours.is_locked("stage-key")  # its owner lives: wait
        assert not ours.acquire_lock("stage-key", "us", acquire_timeout=0.3)
        assert not ours.wait_for_lock("stage-key", timeout=0.2)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert (tmp_path / "stage-key.lock").exists()  # the killed process could not clean up its file...
    ours = FileLockManager(tmp_path)
    assert not ours.is_locked("stage-key")  # ... but its lock died with it
    assert ours.acquire_lock("stage-key", "us", acquire_timeout=0.3)
    assert ours.is_lock_holder("stage-key", "us") and not ours.is_lock_holder("stage-key", "them")
    other = FileLockManager(tmp_path)  # another manager (another thread or process) sees it held
    assert other.is_locked("stage-key") and not other.acquire_lock("stage-key", "them", acquire_timeout=0.2)
    ours.release_lock("stage-key", "us")
    assert other.acquire_lock("stage-key", "them", acquire_timeout=0.2)
    other.release_lock("stage-key", "them")


def test_the_lock_manager_travels_to_a_worker_without_its_held_locks(tmp_path):
    import pickle

    ours = FileLockManager(tmp_path)
    assert ours.acquire_lock("stage-key", "us")
    copy = pickle.loads(pickle.dumps(ours))  # what Dask does with a task's cache policy
    assert copy.directory == tmp_path and copy.is_locked("stage-key") and not copy.is_lock_holder("stage-key", "us")
    ours.release_lock("stage-key", "us")
    assert not copy.is_locked("stage-key")
