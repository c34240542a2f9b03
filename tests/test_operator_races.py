"""Operators acting on a run while its engine moves it: real interleavings of two
PostgreSQL sessions (tests/races.py), no sleeps. Operator actions and the engine decide
under the run row's lock (docs/architecture.md, "Locks"), so neither undoes the other
silently."""

from __future__ import annotations

import threading

import pytest

from runs import engine
from runs.engine.complete import fail_attempt
from runs.engine.start import start_attempt
from runs.models import Run, Step
from runs.states import RunStatus, StepStatus
from tests.integration.harness import wait_for
from tests.races import Background, is_waiting_on_lock

pytestmark = pytest.mark.django_db(transaction=True)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def _settled(job: Background) -> bool:
    return not job.thread.is_alive() or is_waiting_on_lock(job.pid)


def test_a_branch_failing_during_a_retry_does_not_silently_undo_it(monkeypatch):
    """`left_fails` failed for good and failed the run; `right_flaky` is running. While
    right's failure is being decided (it read the run failed), an operator retries
    left. The retry must not be accepted and then reverted: either it waits and is
    refused (right failed too: retry them together), or right sees the run reopened and
    retries. Never: the retry returns, right fails the reopened run, left is stranded."""
    run = engine.submit_run(workflow="two-failing-branches", input={})
    right = start_attempt(step_id=step_of(run, "right_flaky").id, worker="w")
    assert right is not None
    engine.execute_step(step_id=step_of(run, "left_fails").id, worker="w")
    assert Run.objects.get(pk=run.id).status == RunStatus.FAILED

    deciding, resume = threading.Event(), threading.Event()
    real = Step.has_attempts_left

    def paused(step: Step) -> bool:
        if step.name == "right_flaky":
            deciding.set()
            assert resume.wait(30)
        return real.fget(step)

    monkeypatch.setattr(Step, "has_attempts_left", property(paused))
    failing = Background(lambda: fail_attempt(right, error="boom", uncertain=False))
    assert deciding.wait(30)
    retry = Background(
        lambda: engine.retry_steps(run_id=run.id, step_keys=["left_fails"], actor="ann")
    )
    wait_for(lambda: _settled(retry), timeout=30, what="the retry to finish or wait")
    resume.set()
    outcome = failing.join()
    try:
        retry.join()
        retried = True
    except engine.StepNotRetryable:
        retried = False
    monkeypatch.undo()

    run.refresh_from_db()
    left, right_step = step_of(run, "left_fails"), step_of(run, "right_flaky")
    if retried:
        assert outcome == "retrying"
        assert run.status == RunStatus.RUNNING
        assert (left.status, right_step.status) == (StepStatus.QUEUED, StepStatus.RETRYING)
    else:
        assert outcome == "failed"
        assert run.status == RunStatus.FAILED
        assert (left.status, right_step.status) == (StepStatus.FAILED, StepStatus.FAILED)
