"""Cancelling a run while its steps finish or start: real interleavings of two
PostgreSQL sessions (tests/support/races.py), no sleeps. Each test holds one session at a
chosen point, lets the other run into it (or past it), then releases it.

The rule they check is the lock order of docs/architecture.md ("Locks"): whatever
decides about a run does so under the run row's lock, so a cancel sees every step that
finished before it and no step starts after it."""

from __future__ import annotations

import threading

import pytest
from django.db import transaction

from runs import engine
from runs.engine.tools import finish_with_result, start_attempt
from runs.engine.tools import ready_module as ready_module
from runs.models import Attempt, Event, Run, Step
from runs.record import events
from runs.states import AttemptStatus, RunStatus, StepStatus
from tests.support.factories import run_queued
from tests.support.races import Background

pytestmark = pytest.mark.django_db(transaction=True)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def _compensations(run: Run) -> dict[str, str]:
    return dict(Step.objects.filter(run=run).exclude(compensates="").values_list("name", "status"))


def _run_compensations(run: Run) -> None:
    """Execute the run's queued compensations in this process until none is left."""
    while (
        step := Step.objects.filter(run=run, status=StepStatus.QUEUED)
        .exclude(compensates="")
        .first()
    ):
        engine.execute_step(step_id=step.id, worker="t")


def _reserved_and_charging(outcome: str = "ok") -> tuple[Run, object]:
    """A compensated-order run whose `reserve` succeeded and whose `charge` (compensated
    by `refund`) is running."""
    run = engine.submit_run(workflow="compensated-order", input={"outcome": outcome})
    engine.execute_step(step_id=step_of(run, "reserve").id, worker="t")
    started = start_attempt(step_id=step_of(run, "charge").id, worker="t")
    assert started is not None
    return run, started


def test_a_cancel_waiting_on_a_finish_compensates_the_step_that_finished():
    """The finish of `charge` holds the run row (its counters); the cancel must wait
    for it and then see `charge` succeeded, so `refund` is planned too."""
    run, started = _reserved_and_charging()
    with transaction.atomic():
        finish_with_result(started, 100)  # the run row is locked until the commit
        cancel = Background(lambda: engine.cancel_run(run_id=run.id, actor="ann"))
        cancel.wait_blocked()
    assert cancel.join().status == RunStatus.COMPENSATING

    began = Event.objects.get(run=run, type=events.RUN_COMPENSATING)
    assert began.payload["compensations"] == ["refund", "release"]
    _run_compensations(run)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert _compensations(run) == {"refund": "succeeded", "release": "succeeded"}


def test_a_cancel_waiting_on_the_only_compensable_finish_does_not_skip_compensation():
    """Nothing compensable had succeeded when the cancel began: it must not end the run
    `cancelled` straight away while `reserve`'s finish is committing."""
    run = engine.submit_run(workflow="compensated-order", input={"outcome": "ok"})
    started = start_attempt(step_id=step_of(run, "reserve").id, worker="t")
    assert started is not None
    with transaction.atomic():
        finish_with_result(started, "seat-1")
        cancel = Background(lambda: engine.cancel_run(run_id=run.id, actor="ann"))
        cancel.wait_blocked()
    assert cancel.join().status == RunStatus.COMPENSATING
    _run_compensations(run)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert _compensations(run) == {"release": "succeeded"}


def test_a_step_finishing_while_the_last_compensation_ends_the_run_is_compensated(
    monkeypatch,
):
    """`charge` was running when the run began compensating. Its finish sees the run
    compensating while the last compensation (`release`) is delivered. `refund` must
    still run, never left a queued step that nothing starts: the finish holds the run
    FOR UPDATE from before its statement (a dependent of `charge` has a condition,
    whose failure would fail the run: docs/architecture.md, "Locks"), so `release`
    waits for it, and then finds `refund` counted: the run ends once both are done."""
    run, started = _reserved_and_charging()
    engine.cancel_run(run_id=run.id, actor="ann")
    assert _compensations(run) == {"release": "queued"}

    paused, resume = threading.Event(), threading.Event()
    real = ready_module.compensate_late_step

    def pausing(**kwargs):
        paused.set()
        assert resume.wait(30)
        return real(**kwargs)

    monkeypatch.setattr(ready_module, "compensate_late_step", pausing)
    finish = Background(lambda: finish_with_result(started, 100))
    assert paused.wait(30)
    monkeypatch.setattr(ready_module, "compensate_late_step", real)
    release = Step.objects.get(run=run, key="release")
    last = Background(lambda: engine.execute_step(step_id=release.id, worker="t"))
    last.wait_blocked()  # its start, on the run row the finish holds
    resume.set()
    finish.join()
    assert last.join() == "succeeded"

    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATING
    assert _compensations(run) == {"release": "succeeded", "refund": "queued"}
    _run_compensations(run)
    run.refresh_from_db()
    assert (run.status, run.steps_remaining) == (RunStatus.CANCELLED, 0)
    assert _compensations(run) == {"release": "succeeded", "refund": "succeeded"}
    assert not Step.objects.filter(run=run, status=StepStatus.QUEUED).exists()


def test_a_compensable_step_finishing_after_a_plain_cancel_is_compensated():
    """The run had nothing to undo when it was cancelled (it went straight to
    `cancelled`), but `reserve` was running: when it succeeds, its undo runs."""
    run = engine.submit_run(workflow="compensated-order", input={"outcome": "ok"})
    started = start_attempt(step_id=step_of(run, "reserve").id, worker="t")
    assert engine.cancel_run(run_id=run.id, actor="ann").status == RunStatus.CANCELLED

    finish_with_result(started, "seat-1")

    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATING
    assert run.ends_as == RunStatus.CANCELLED
    _run_compensations(run)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.error.startswith("cancelled by ann")
    assert _compensations(run) == {"release": "succeeded"}


def test_a_cancel_waits_for_a_start_blocked_on_its_step_row_and_names_its_step():
    """Another session holds the queued step's row (the sweeper republishing it, say);
    a delivery's start waits on it, having read the run active. The operator's cancel
    must not commit under it (the start would then run the step in a cancelled run
    after the cancel returned): it waits for the start, and names the started step."""
    run = engine.submit_run(workflow="pure-chain", input={})
    first = step_of(run, "first")
    holder_has_row, release_row = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        with transaction.atomic():
            Step.objects.select_for_update().filter(pk=first.id).update(queued_at=first.queued_at)
            holder_has_row.set()
            assert release_row.wait(30)

    holder = Background(hold_the_row)
    assert holder_has_row.wait(30)
    start = Background(lambda: start_attempt(step_id=first.id, worker="w"))
    start.wait_blocked()
    cancel = Background(lambda: engine.cancel_run(run_id=run.id, actor="ann"))
    cancel.wait_blocked()  # behind the start, which read the run active
    release_row.set()
    holder.join()

    assert start.join() is not None
    assert cancel.join().status == RunStatus.CANCELLED
    payload = Event.objects.get(run=run, type=events.RUN_CANCELLED).payload
    assert payload["still_running"] == ["first"]


def test_a_start_waiting_for_a_cancel_sees_the_run_cancelled():
    """The cancel holds the run row when a delivery's start comes: the start waits for
    it and reads the run's newest version, cancelled: nothing starts."""
    run = engine.submit_run(workflow="pure-chain", input={})
    first = step_of(run, "first")
    with transaction.atomic():
        engine.cancel_run(run_id=run.id, actor="ann")
        start = Background(lambda: start_attempt(step_id=first.id, worker="late"))
        start.wait_blocked()
    assert start.join() is None
    first.refresh_from_db()
    # Withdrawn by the cancel (state/stopped.py): it will never start.
    assert (first.status, first.attempts) == (StepStatus.PENDING, 0)
    assert not Attempt.objects.filter(run=run).exists()


def test_a_cancel_waits_for_a_start_in_flight_and_names_its_step():
    """A start that read the run active holds its lock until it commits: the cancel
    waits for it, then lists the started step as still running."""
    run = engine.submit_run(workflow="pure-chain", input={})
    first = step_of(run, "first")
    with transaction.atomic():
        started = start_attempt(step_id=first.id, worker="w")
        assert started is not None
        cancel = Background(lambda: engine.cancel_run(run_id=run.id, actor="ann"))
        cancel.wait_blocked()
    assert cancel.join().status == RunStatus.CANCELLED
    payload = Event.objects.get(run=run, type=events.RUN_CANCELLED).payload
    assert payload["still_running"] == ["first"]
    assert Attempt.objects.get(run=run).status == AttemptStatus.RUNNING
    finish_with_result(started, "first")
    run_queued(run)
    assert step_of(run, "second").status == StepStatus.PENDING
