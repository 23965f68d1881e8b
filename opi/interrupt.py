"""A process-wide stop: long work (LLM requests and their waits, embedding a large dataset) ends within seconds
when the process is exiting (SIGTERM turned into ``sys.exit``, Ctrl-C), instead of keeping it alive."""
from __future__ import annotations

import asyncio
import sys
import threading
import time

_STOP = threading.Event()  # set by stop_requests(): every wait of this process ends
_ABANDONED: list[threading.Event] = []  # set when native work this process stopped waiting for has ended


def stop_requests() -> None:
    """End every wait in this process (LLM backoff sleeps and batches, embedding slices): for a signal handler or
    an exit hook. Work in flight is abandoned to daemon threads."""
    _STOP.set()


def exiting() -> bool:
    """Is this process on its way out? ``stop_requests()`` was called or -- seen from another thread -- the main
    thread is unwinding a ``SystemExit``, ``KeyboardInterrupt`` or similar (SIGTERM turned into ``sys.exit``,
    Ctrl-C) while it waits for this one (e.g. a task runner joining its threads). A main thread that simply returned
    is not a reason: non-daemon threads may go on working after it."""
    if _STOP.is_set():
        return True
    main = threading.main_thread()
    if threading.current_thread() is main:
        return False  # the signal's exception is raised in this very thread
    current = getattr(sys, "_current_exceptions", None)
    if current is None:
        return False
    try:
        handled = current().get(main.ident)
    except Exception:  # a private CPython helper: never let it break a request
        return False
    if isinstance(handled, tuple):  # Python < 3.12: (type, value, traceback)
        handled = handled[1]
    # SystemExit, KeyboardInterrupt, an orchestrator's own signal exception (Prefect's TerminationSignal): the
    # BaseExceptions that end a program, not those that end a generator or an asyncio task
    return isinstance(handled, BaseException) and not isinstance(handled, (Exception, GeneratorExit,
                                                                            asyncio.CancelledError))


def wait_or_stop(seconds: float) -> bool:
    """Sleep ``seconds``; False (at once) when the process is exiting, True when the time is up."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if exiting():
            return False
        _STOP.wait(min(left, 0.2))
    return True


def abandon(done: threading.Event) -> None:
    """Note native work (a liblinear fit in a thread of its own) this process stopped waiting for; ``done`` is set
    when it ends."""
    _ABANDONED.append(done)


def native_work_abandoned() -> bool:
    """Is a thread still computing in native code this process stopped waiting for? Such a process must end
    without the C runtime's exit, which unloads the libraries (scipy's OpenBLAS) under that thread: a segfault."""
    return not all(done.is_set() for done in _ABANDONED)
