"""opi.interrupt: one process-wide stop, and waits that end when the process is exiting."""
import sys
import threading
import time

import pytest

from opi.interrupt import exiting, stop_requests, wait_or_stop


def test_a_wait_lasts_its_time_when_nothing_stops_it(process_stop):
    started = time.monotonic()
    assert wait_or_stop(0.3) is True
    assert 0.3 <= time.monotonic() - started < 2
    assert wait_or_stop(0) is True


def test_stop_requests_ends_every_wait_at_once(process_stop):
    assert not exiting()
    stop_requests()
    assert exiting() and process_stop.is_set()
    started = time.monotonic()
    assert wait_or_stop(30) is False
    assert time.monotonic() - started < 1


def test_a_stop_from_another_thread_ends_a_wait_within_a_fraction_of_a_second(process_stop):
    threading.Timer(0.2, stop_requests).start()
    started = time.monotonic()
    assert wait_or_stop(30) is False
    assert time.monotonic() - started < 2


class JoinedOnExit:
    """Like a task runner's ``__exit__``: the main thread joins the worker while it unwinds."""

    def __init__(self, worker: threading.Thread):
        self.worker = worker

    def __enter__(self):
        self.worker.start()

    def __exit__(self, *exc):
        self.worker.join(timeout=30)


def wait_in_a_worker(seconds):
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(waited=wait_or_stop(seconds), seen=exiting()))
    return worker, outcome


def test_a_worker_sees_the_main_thread_unwinding_a_system_exit(process_stop):
    worker, outcome = wait_in_a_worker(30)
    started = time.monotonic()
    with pytest.raises(SystemExit):
        with JoinedOnExit(worker):
            time.sleep(0.1)
            sys.exit(143)  # what SIGTERM's handler does
    assert outcome == {"waited": False, "seen": True} and time.monotonic() - started < 5
    assert not exiting()  # the main thread itself: its exception is raised in it, nothing to detect


def test_an_ordinary_exception_in_the_main_thread_is_no_reason_to_stop(process_stop):
    worker, outcome = wait_in_a_worker(0.5)
    with pytest.raises(ValueError):
        with JoinedOnExit(worker):
            raise ValueError("a failed step, handled by the caller")
    assert outcome == {"waited": True, "seen": False}


def test_native_work_counts_as_abandoned_until_it_ends(monkeypatch):
    import threading

    from opi.interrupt import abandon, native_work_abandoned

    monkeypatch.setattr("opi.interrupt._ABANDONED", [])  # not the work other tests of this process abandoned
    done = threading.Event()
    abandon(done)
    assert native_work_abandoned()
    done.set()
    assert not native_work_abandoned()
