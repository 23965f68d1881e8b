"""Which process owns a lock or a run (``this_process``), and whether that owner is gone (``gone``): only a process
of this machine whose pid no longer exists is gone; anything we cannot tell counts as alive."""
import os
import socket
import subprocess
import sys

from flows.tracking import owners
from flows.tracking.owners import gone, this_process


def test_this_process_is_this_machine_and_this_pid():
    assert this_process() == (socket.gethostname(), str(os.getpid()))


def test_a_running_process_of_this_machine_is_not_gone():
    host, pid = this_process()
    assert gone(host, pid) is False


def test_a_process_of_this_machine_that_ended_is_gone():
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # reaped: no process with its pid any more
    assert gone(socket.gethostname(), str(ended.pid)) is True


def test_another_machines_process_is_never_gone_even_with_a_pid_that_does_not_exist_here(monkeypatch):
    asked = []
    monkeypatch.setattr(owners.os, "kill", lambda pid, signal: asked.append(pid))
    assert gone(socket.gethostname() + "-elsewhere", "123") is False
    assert asked == []  # another machine's pid is not even looked up here


def test_a_pid_that_cannot_be_read_counts_as_alive():
    host = socket.gethostname()
    assert gone(host, "not-a-pid") is False
    assert gone(host, "") is False
    assert gone(host, "12.5") is False


def test_a_process_we_may_not_signal_counts_as_alive(monkeypatch):
    def refused(pid, signal):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(owners.os, "kill", refused)
    assert gone(socket.gethostname(), "4242") is False


def test_the_owner_is_checked_with_signal_zero_on_its_pid(monkeypatch):
    sent = []

    def missing(pid, signal):
        sent.append((pid, signal))
        raise ProcessLookupError(3, "No such process")

    monkeypatch.setattr(owners.os, "kill", missing)
    assert gone(socket.gethostname(), "4242") is True
    assert sent == [(4242, 0)]  # signal 0: an existence check, nothing is delivered
