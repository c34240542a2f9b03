"""Cancelling a run: nothing new starts, running attempts finish, the run ends
cancelled, and the event says who."""

from __future__ import annotations

import pytest

from runs import engine
from runs.engine.tools import finish_with_result, start_attempt
from runs.errors import RunNotActive, RunNotFound
from runs.models import Event, Run, Step
from runs.record import events
from runs.states import RunStatus, StepStatus
from tests.support.factories import run_queued


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def test_cancel_a_pending_run_nothing_starts(db):
    run = engine.submit_run(workflow="pure-chain", input={})
    cancelled = engine.cancel_run(run_id=run.id, actor="ann", reason="wrong input")
    assert (cancelled.status, cancelled.error) == (
        RunStatus.CANCELLED,
        "cancelled by ann: wrong input",
    )
    assert cancelled.finished_at is not None
    assert engine.execute_step(step_id=step_of(run, "first").id, worker="w") == "skipped"
    assert step_of(run, "first").attempts == 0
    event = Event.objects.get(run=run, type=events.RUN_CANCELLED)
    assert event.payload == {"actor": "ann", "reason": "wrong input", "still_running": []}


def test_cancel_lets_a_running_attempt_finish_and_queues_nothing_after_it(db):
    run = engine.submit_run(workflow="pure-chain", input={})
    started = start_attempt(step_id=step_of(run, "first").id, worker="w")
    engine.cancel_run(run_id=run.id, actor="ann")
    assert Event.objects.get(run=run, type=events.RUN_CANCELLED).payload["still_running"] == [
        "first"
    ]

    finish_with_result(started, "first")

    assert step_of(run, "first").status == StepStatus.SUCCEEDED
    assert step_of(run, "second").status == StepStatus.PENDING
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


def test_cancel_a_failing_attempt_fails_its_step_instead_of_retrying(db):
    run = engine.submit_run(
        workflow="flaky-merge", input={"change_id": 1, "mode": "not_applied_once"}
    )
    started = start_attempt(step_id=step_of(run, "merge").id, worker="w")
    engine.cancel_run(run_id=run.id, actor="ann")
    from runs.engine.tools import fail_attempt

    assert fail_attempt(started, error="NotApplied: refused", uncertain=False) == "failed"
    assert step_of(run, "merge").status == StepStatus.FAILED
    assert Run.objects.get(pk=run.id).status == RunStatus.CANCELLED


def test_cancel_twice_or_a_finished_run_is_refused(db):
    run = engine.submit_run(workflow="pure-chain", input={})
    run_queued(run)
    with pytest.raises(RunNotActive, match="is already succeeded; it cannot be cancelled"):
        engine.cancel_run(run_id=run.id, actor="ann")
    other = engine.submit_run(workflow="pure-chain", input={})
    engine.cancel_run(run_id=other.id, actor="ann")
    with pytest.raises(RunNotActive, match="already cancelled"):
        engine.cancel_run(run_id=other.id, actor="bob")
    assert Event.objects.filter(type=events.RUN_CANCELLED).count() == 1


def test_cancel_unknown_run_is_refused(db):
    with pytest.raises(RunNotFound):
        engine.cancel_run(run_id="00000000-0000-0000-0000-000000000000", actor="ann")
