"""Signals sent while the steps around their wait finish: real interleavings of two
PostgreSQL sessions (tests/support/races.py), no sleeps. The engine's lock order
(docs/architecture.md, "Locks") is what keeps them from deadlocking: the run row
first, then the run's other steps."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from runs import engine
from runs.engine.tools import finish_with_result, start_attempt
from runs.engine.tools import waits_module as waits_module
from runs.models import Run, Signal, Step
from runs.states import RunStatus, StepStatus
from tests.support.factories import run_queued
from tests.support.races import Background, is_waiting_on_lock
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def _pause_before_locking_the_run(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """send_signal() pauses just before it asks for the run row's lock (whatever it
    locked before that stays locked meanwhile)."""
    paused, resume = threading.Event(), threading.Event()
    real = Run.objects

    class Manager:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def select_for_update(self, *args: Any, **kwargs: Any) -> Any:
            paused.set()
            assert resume.wait(30)
            return real.select_for_update(*args, **kwargs)

    shim = SimpleNamespace(objects=Manager(), DoesNotExist=Run.DoesNotExist)
    monkeypatch.setattr(waits_module, "Run", shim)
    return paused, resume


def test_a_signal_sent_while_the_step_before_its_wait_finishes_does_not_deadlock(monkeypatch):
    """`prepare` finishes (run row, then its dependent `approval`, a wait) while the
    approval is sent early. Neither may be aborted: the finish's effect happened, and
    the sender must get its answer."""
    run = engine.submit_run(workflow="wait-approval", input={"order": 7})
    started = start_attempt(step_id=step_of(run, "prepare").id, worker="w")
    assert started is not None
    paused, resume = _pause_before_locking_the_run(monkeypatch)

    signal = Background(
        lambda: engine.send_signal(
            run_id=run.id, name="approval", payload={"approved": True}, actor="ann"
        )
    )
    assert paused.wait(30)
    finish = Background(lambda: finish_with_result(started, {"order": 7}))
    # The finish either completes, or waits on a row the sender holds.
    wait_for(
        lambda: not finish.thread.is_alive() or is_waiting_on_lock(finish.pid),
        timeout=30,
        what="the finish to complete or wait",
    )
    resume.set()
    sent = signal.join()
    finish.join()
    monkeypatch.undo()

    assert isinstance(sent, Signal)
    assert step_of(run, "prepare").status == StepStatus.SUCCEEDED
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert step_of(run, "approval").result["payload"] == {"approved": True}
