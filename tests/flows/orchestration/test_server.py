"""Prefect's API for a command: the user's server checked to answer, one line otherwise; the temporary server's
children found again after a killed run."""
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
