"""A step attempt's time bound, enforced in the worker that runs it
(docs/authoring.md#timeouts).

Two stops. At the timeout, SIGALRM raises StepTimedOut inside the step's call (in the
process's main thread, where Celery's prefork children run their tasks): a call
blocked in a socket read or a sleep is interrupted, and the attempt ends as its kind
requires. A call that never returns to the interpreter, or that swallows the stop, is
not interrupted; so when the grace after the timeout has passed too, a watchdog thread
ends the process with SIGKILL, and Celery's pool starts a new one, as its hard time
limit does. The attempt's lease never runs past that moment (attempts/lease.py), so
the step is recovered as soon as the process is gone, and the recovery records the
timeout (policies/recover.py)."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)


class StepTimedOut(BaseException):
    """Raised in a step's call when its timeout passes. A BaseException, as
    KeyboardInterrupt is, so that a step's own `except Exception` does not swallow it."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the step ran past its timeout of {seconds:g} s")
        self.seconds = seconds


class _Bound:
    armed = False
    seconds = 0.0


_bound = _Bound()


def _alarm(signum: int, frame: FrameType | None) -> None:
    if _bound.armed:  # the call may have returned just now: then nothing is stopped
        _bound.armed = False
        raise StepTimedOut(_bound.seconds)


class _Watchdog:
    """One thread per process that ends it if an armed bound is not disarmed in time.

    Arming and disarming are two attribute writes, no lock and no wake-up: they happen
    twice per step on the hot path. The thread looks once a second, so a process ends
    up to a second after its bound, which the grace already allows for."""

    def __init__(self) -> None:
        self._deadline: float | None = None
        self._what = ""
        self._thread: threading.Thread | None = None

    def arm(self, after: float, what: str) -> None:
        self._what, self._deadline = what, time.monotonic() + after
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._watch, name="step-timeout-watchdog", daemon=True
            )
            self._thread.start()

    def disarm(self) -> None:
        self._deadline = None

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            deadline, what = self._deadline, self._what
            if deadline is None or time.monotonic() < deadline:
                continue
            if self._deadline != deadline:  # disarmed (or armed again) meanwhile
                continue
            log.critical(
                "%s did not stop at its timeout: ending worker process %s so that its pool "
                "starts a new one",
                what,
                os.getpid(),
            )
            for handler in logging.getLogger().handlers:
                handler.flush()
            os.kill(os.getpid(), signal.SIGKILL)


_watchdog = _Watchdog()
_replaceable = False


def replace_hung_processes() -> None:
    """Let this process end itself when a step's call outlives its timeout and grace:
    called in each child of a Celery prefork pool (runs/tasks.py), whose parent starts
    a new child for one that died. Nowhere else: a solo worker, the web process or a
    test would end for good."""
    global _replaceable
    _replaceable = True


def may_replace_process() -> bool:
    return _replaceable


@contextmanager
def bounded(seconds: float, *, kill_after: float | None, what: str) -> Iterator[None]:
    """Run the block under a timeout of `seconds`: StepTimedOut is raised in it when they
    pass (in the main thread only: elsewhere there is no signal to raise it with), and
    with `kill_after` the process ends that many seconds after the start if the block
    still runs. Only a worker process's task may ask for `kill_after`: never the web
    process or the test harness, which must not end."""
    soft = threading.current_thread() is threading.main_thread()
    replaced: Any = None
    before = (0.0, 0.0)
    began = time.monotonic()
    if soft:
        # Installed once and left in place (signal() is a system call, slow in some
        # sandboxes; ours does nothing unarmed), unless it replaced another Python
        # handler (pytest-timeout's, in a test run), which gets its place back after.
        current = signal.getsignal(signal.SIGALRM)
        if current is not _alarm:
            signal.signal(signal.SIGALRM, _alarm)
            replaced = current if callable(current) else None
        _bound.seconds, _bound.armed = seconds, True
        before = signal.setitimer(signal.ITIMER_REAL, seconds)
    if kill_after is not None:
        _watchdog.arm(kill_after, what)
    try:
        yield
    finally:
        if soft:
            _bound.armed = False  # first: an alarm due now must not raise in here
            signal.setitimer(signal.ITIMER_REAL, 0)
            if replaced is not None:
                signal.signal(signal.SIGALRM, replaced)
            if before[0] > 0:  # someone else's timer was running: it runs on
                left = before[0] - (time.monotonic() - began)
                signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), before[1])
        if kill_after is not None:
            _watchdog.disarm()
