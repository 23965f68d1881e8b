"""Servers a run starts end with it: a watched process ends when its starter is killed; orphans of a killed run
are found (and only those) and stopped."""
import os
import subprocess
import sys
import time
from pathlib import Path

from opi import processes
from tests.helpers.cli import wait_for

STARTER = """
import subprocess, sys
child = subprocess.Popen({command!r}, start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
print(child.pid, flush=True)
{then}
"""


def started_by_a_starter(command: list[str], then: str) -> tuple[subprocess.Popen, int]:
    """A starter process that starts ``command`` in a session of its own, then runs ``then``; and the child's pid."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER.format(command=command, then=then)],
                               stdout=subprocess.PIPE, text=True)
    return starter, int(starter.stdout.readline())


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_watched_server_ends_when_the_run_that_started_it_is_killed():
    server = processes.watched_command("http.server", "0", "--bind", "127.0.0.1")
    starter, pid = started_by_a_starter(server, "import time; time.sleep(600)")
    try:
        time.sleep(1.5)
        assert alive(pid)  # serving while its run lives
        starter.kill()  # kill -9: no exit handler of the run stops it
        starter.wait()
        wait_for(lambda: not alive(pid), 10, "the watched server to end")
    finally:
        processes.stop([pid] if alive(pid) else [])


WATCH = """
import threading
from opi.processes import watch_parent
gone = threading.Event()
watch_parent(gone.set, interval=0.05)
print(gone.wait(2), flush=True)
"""


def test_a_server_whose_run_died_before_its_watch_started_ends_too():
    """The watch compares its parent with the pid its run stated (``STARTED_BY``), not with the parent it finds when
    it starts: a run killed while its server was still starting left init as that parent, and the server on."""
    def gone(environment: dict) -> str:
        return subprocess.run([sys.executable, "-c", WATCH], env=environment, capture_output=True, text=True,
                              check=True).stdout.strip()

    assert gone(processes.environment_for_child()) == "False"  # its run (this process) lives
    assert gone({**os.environ, processes.STARTED_BY: "1"}) == "True"  # stated by a run that is not its parent now
    assert gone({k: v for k, v in os.environ.items() if k != processes.STARTED_BY}) == "False"  # unstated: parent


def test_orphans_are_the_servers_whose_run_is_gone_and_stop_ends_them():
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)", "-m", "opi.llm.local_server"]
    starter, orphan = started_by_a_starter(sleeper, "")  # the starter exits at once: its child is an orphan
    starter.wait()
    living = subprocess.Popen(sleeper)  # started by this (Python) process, still alive: not an orphan
    try:
        wait_for(lambda: orphan in processes.orphans(("-m", "opi.llm.local_server")), 10, "the orphan")
        found = processes.orphans(("-m", "opi.llm.local_server"))
        assert orphan in found and living.pid not in found
        assert processes.orphans(("-m", "opi.llm.local_server"), {"PREFECT_HOME": "/nowhere"}) == []
        assert processes.stop([orphan]) == [orphan]
        wait_for(lambda: not alive(orphan), 10, "the orphan to end")
        assert alive(living.pid)
    finally:
        living.kill()
        living.wait()
        processes.stop([orphan] if alive(orphan) else [])


def test_a_server_whose_parent_is_gone_is_an_orphan():
    assert processes.orphaned(1)
    assert processes.orphaned(2**22 + 7)  # no such process
    assert not processes.orphaned(os.getpid())  # a Python process: a run still alive
