"""The stage cache's locks: a live owner is waited for, a killed owner's lock is broken (so a re-run resumes)."""
import os
import signal
import subprocess
import sys
import textwrap

from flows.tasks import ProcessLockManager


def test_a_killed_owners_lock_is_broken_and_a_live_one_is_respected(tmp_path):
    script = textwrap.dedent(f"""
        import pathlib, sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from flows.tasks import ProcessLockManager
        assert ProcessLockManager(lock_files_directory=pathlib.Path({str(tmp_path)!r})).acquire_lock("stage-key", "them")
        print("locked", flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        ours = ProcessLockManager(lock_files_directory=tmp_path)
        assert ours.is_locked("stage-key")  # its owner lives: wait
        assert not ours.acquire_lock("stage-key", "us", acquire_timeout=0.3)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert (tmp_path / "stage-key.lock").exists()  # the killed process could not clean up
    ours = ProcessLockManager(lock_files_directory=tmp_path)
    assert ours.acquire_lock("stage-key", "us", acquire_timeout=0.3)  # stale: broken, taken
    assert ours.is_lock_holder("stage-key", "us")
    ours.release_lock("stage-key", "us")
    assert not list(tmp_path.glob("*.lock")) and not list(tmp_path.glob("*.owner"))
