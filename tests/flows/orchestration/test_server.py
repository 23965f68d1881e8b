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


def test_a_server_whose_parent_is_gone_is_an_orphan():
    assert server.orphaned(1)
    assert server.orphaned(2**22 + 7)  # no such process
    import os
    assert not server.orphaned(os.getpid())  # a Python process: a run still alive
