import os
import shutil
import socket
import subprocess

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _loopback_works() -> bool:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        try:
            socket.create_connection(server.getsockname(), timeout=2).close()
            return True
        except OSError:
            return False


def pytest_sessionstart(session):
    """Prefect's temporary server and the test LLM servers live on 127.0.0.1. A fresh network namespace (as made by
    `unshare -n` to prove the suite needs no network) starts with its loopback down: bring it up when we may."""
    if not _loopback_works() and shutil.which("ip"):
        subprocess.run(["ip", "link", "set", "lo", "up"], check=False, capture_output=True)


@pytest.fixture(autouse=True)
def _signal_handlers_restored():
    """A command run in this process installs OPI's SIGTERM handler (``flows.cli.start``); put pytest's back after
    each test, so a SIGTERM meant for the test session (CI's time limit, ``kill``) is not turned into a test's
    ``SystemExit``."""
    import signal

    saved = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    yield
    for number, handler in saved.items():
        if signal.getsignal(number) is not handler:
            signal.signal(number, handler)


@pytest.fixture(autouse=True)
def _mlflow_environment_restored():
    """MLflow's process-wide settings (``mlflow.set_tracking_uri`` also sets MLFLOW_TRACKING_URI, which every command
    a later test starts would inherit) are put back after each test."""
    import os

    names = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID")
    saved = {name: os.environ.get(name) for name in names}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2, loaded once for the whole test session: the process's shared embedder, so the
    relation classifier's features (``opi.relation_features``) use the same model and vector cache."""
    from opi.embeddings import shared_embedder

    return shared_embedder()


@pytest.fixture
def process_stop(monkeypatch):
    """A fresh, unset process-wide stop (``opi.interrupt._STOP``) for this test only: setting it
    (``opi.interrupt.stop_requests()``) cannot end the waits of later tests."""
    import threading

    from opi import interrupt

    event = threading.Event()
    monkeypatch.setattr(interrupt, "_STOP", event)
    return event


@pytest.fixture(scope="session")
def long_article() -> str:
    """About 1,000 words in eight paragraphs, with abbreviations and decimals to trip naive splitters."""
    topics = ["harbour", "railway", "granary", "observatory", "library", "foundry", "orchard", "bridge"]
    paragraphs = []
    for p, topic in enumerate(topics):
        sentences = [
            f"The {topic} of Velmora was first recorded in {1700 + 13 * p} by Dr. Amsel Rook, a surveyor of note.",
            f"Its keepers measured {p + 2}.5 tonnes of stone each season, i.e. far more than the town required.",
            f"Did anyone in the valley question why the {topic} needed so many workers in winter?",
            f"Records from the council show that {p + 3} families depended on the {topic} for their income!",
            f"In later decades the {topic} changed hands twice, and each owner altered its outer walls.",
            f"Visitors today can still see the carved lintel above the {topic} entrance, weathered but legible.",
            f"A ledger kept by the {topic} clerk lists wages, repairs and the price of lamp oil for every month.",
            f"Historians disagree about whether the {topic} brought the town more prosperity or more debt.",
        ]
        paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs)


@pytest.fixture
def tiny_chunks():
    from tests.helpers.chunks import TINY_ARTICLE, make_chunks

    return make_chunks(TINY_ARTICLE)
