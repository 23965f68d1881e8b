"""Prefect's API for a command: the user's server checked to answer, one line otherwise; the temporary server's
children found again after a killed run."""
import threading

import pytest

from flows.orchestration import server
from tests.helpers.cli import free_port


@pytest.fixture
def users_url(monkeypatch):
    def use(url):
        monkeypatch.setattr(server, "_USER_URL", [url])
        monkeypatch.setattr(server, "_SERVER", [])
    return use


def test_a_users_server_that_does_not_answer_is_one_line(users_url):
    url = f"http://127.0.0.1:{free_port()}/api"
    users_url(url)
    with pytest.raises(server.OrchestrationError, match=rf"Prefect's API at {url} \(PREFECT_API_URL\) does not "
                                                        "answer: start it"):
        server.ensure_api()
    assert not server.uses_temporary_server()


def test_without_a_users_server_the_temporary_one_is_ours(users_url):
    users_url(None)
    assert server.uses_temporary_server()


SERVED = """
from prefect import flow
from flows.orchestration import server

@flow
def answer():
    return 42

print("result", server.run_flow(answer))
"""


def test_the_temporary_servers_own_output_stays_off_the_console(tmp_path):
    # a flow against the temporary server, then its shutdown at exit: under load Prefect prints CancelledError
    # tracebacks as it stops; they go to the server's log file, removed when the server did not fail
    import os
    import subprocess
    import sys
    environment = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    environment["PREFECT_HOME"] = str(tmp_path / "prefect")
    done = subprocess.run([sys.executable, "-c", SERVED], capture_output=True, text=True, env=environment,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "result 42" in done.stdout
    assert "Traceback" not in done.stderr and "CancelledError" not in done.stderr + done.stdout
    assert not list((tmp_path / "prefect").glob("opi-server-*.log"))


def booting(monkeypatch, still_booting: bool) -> threading.Event:
    """A temporary server whose boot thread runs until the returned event is set (already set: booted)."""
    done = threading.Event()
    if not still_booting:
        done.set()
    temporary = server.TemporaryServer(f"http://127.0.0.1:{free_port()}/api", 0)
    temporary.boot = threading.Thread(target=done.wait, daemon=True)
    temporary.boot.start()
    monkeypatch.setattr(server, "_USER_URL", [None])
    monkeypatch.setattr(server, "_SERVER", [temporary])
    return done


def test_work_that_needs_no_prefect_is_done_while_the_temporary_server_boots(monkeypatch):
    done = booting(monkeypatch, still_booting=True)
    seen = []
    with server.prefect_api(while_booting=lambda: (seen.append(done.is_set()), done.set())):
        assert done.is_set()
    assert seen == [False]  # done before the boot ended (here it ends the boot)


def test_a_booted_server_is_not_kept_waiting_for_that_work(monkeypatch, users_url):
    done = booting(monkeypatch, still_booting=False)
    server._SERVER[0].boot.join()
    seen = []
    with server.prefect_api(while_booting=lambda: seen.append("work")):
        pass
    users_url(f"http://127.0.0.1:{free_port()}/api")  # a user's server answering: nothing boots
    monkeypatch.setattr(server, "ensure_api", lambda: None)
    with server.prefect_api(while_booting=lambda: seen.append("work")):
        pass
    assert seen == [] and done.is_set()
