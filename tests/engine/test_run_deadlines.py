"""Run deadlines in-process (docs/authoring.md#deadlines): how a deadline is declared
and given at submission, the start statement's refusal past it, and the sweep that ends
a run as a cancel would, compensations included, once however many sweepers run. The
same against real worker processes: tests/integration/test_run_deadlines.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from examples.models import FundsHold
from runs import engine
from runs.errors import InvalidDeadline, StepNotRetryable, SubmissionKeyConflict
from runs.models import Attempt, Event, Run, Step
from runs.record import events
from runs.states import RunStatus, StepStatus
from runs.workflows import PURE, Context
from runs.workflows.definition import Workflow
from runs.workflows.errors import WorkflowDefinitionError
from tests.support.deadline_workflows import DEADLINE
from tests.support.declared import declared
from tests.support.races import Background
from tests.support.waiting import wait_for
from tests.support.workflows import FAIL_WHILE_FLAGGED

pytestmark = pytest.mark.django_db


def _soon(seconds: float = 1.5) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


def _until_past(run: Run) -> None:
    """Wait, on the database's clock, until the run's deadline has passed."""
    wait_for(
        lambda: Run.objects.filter(pk=run.id, deadline_at__lte=Now()).exists(),
        timeout=30,
        what="the run's deadline to pass",
    )


def _step(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def _statuses(run: Run) -> dict[str, str]:
    return dict(Step.objects.filter(run=run).values_list("key", "status"))


def _types(run: Run) -> list[str]:
    return list(Event.objects.filter(run=run).order_by("seq").values_list("type", flat=True))


# --- declaring and submitting -------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1, "30", True, timedelta(0), timedelta(seconds=-5)])
def test_a_workflow_deadline_that_is_not_a_positive_duration_is_refused_where_declared(bad):
    with pytest.raises(WorkflowDefinitionError, match="deadline must be a positive number"):
        Workflow("bad-deadline", 1, deadline=bad)


def test_a_workflow_deadline_is_kept_in_seconds_whether_a_number_or_a_timedelta():
    assert Workflow("d", 1, deadline=timedelta(minutes=2)).deadline_seconds == 120.0
    assert Workflow("d", 1, deadline=90).deadline_seconds == 90.0
    assert Workflow("d", 1).deadline_seconds is None


def test_a_run_gets_its_workflows_deadline_counted_from_its_submission():
    run = engine.submit_run(workflow="deadline-order", input={})

    assert run.deadline_at is not None
    assert (run.deadline_at - run.created_at).total_seconds() == pytest.approx(DEADLINE, abs=1)
    submitted = Event.objects.get(run=run, type=events.RUN_SUBMITTED)
    assert submitted.payload["deadline"] == run.deadline_at.isoformat()


def test_a_run_without_a_deadline_has_none_and_its_event_says_nothing_of_one():
    run = engine.submit_run(workflow="quick-one", input={})

    assert run.deadline_at is None
    assert "deadline" not in Event.objects.get(run=run, type=events.RUN_SUBMITTED).payload


def test_a_submissions_deadline_may_shorten_the_workflows_but_never_lengthen_it():
    earlier = _soon(2)
    shortened = engine.submit_run(workflow="deadline-order", input={}, deadline=earlier)
    later = engine.submit_run(
        workflow="deadline-order", input={}, deadline=timezone.now() + timedelta(hours=1)
    )
    own = engine.submit_run(workflow="quick-one", input={}, deadline=earlier)

    assert shortened.deadline_at == earlier
    assert (later.deadline_at - later.created_at).total_seconds() == pytest.approx(DEADLINE, abs=1)
    assert own.deadline_at == earlier


@pytest.mark.parametrize(
    ("deadline", "says"),
    [
        (datetime(2030, 1, 1, 12, 0), "has no timezone"),
        (datetime(2020, 1, 1, tzinfo=UTC), "has already passed"),
    ],
)
def test_a_submission_deadline_without_a_zone_or_in_the_past_is_refused_writing_nothing(
    deadline, says
):
    with pytest.raises(InvalidDeadline, match=says):
        engine.submit_run(workflow="quick-one", input={}, deadline=deadline)
    assert not Run.objects.exists()


def test_the_same_key_with_another_deadline_is_another_request():
    first = engine.submit(workflow="quick-one", input={}, key="k", deadline=_soon(60)).run
    again = engine.submit(workflow="quick-one", input={}, key="k", deadline=first.deadline_at)
    assert (again.run.id, again.created) == (first.id, False)
    with pytest.raises(SubmissionKeyConflict):
        engine.submit(workflow="quick-one", input={}, key="k", deadline=_soon(120))


# --- the start statement's refusal ---------------------------------------------------------
def test_no_step_starts_once_its_runs_deadline_passed():
    run = engine.submit_run(workflow="deadline-order", input={}, deadline=_soon())
    _until_past(run)

    engine.execute_step(step_id=_step(run, "hold").id, worker="t")

    assert _step(run, "hold").status == StepStatus.QUEUED
    assert not Attempt.objects.filter(run=run).exists()
    assert not FundsHold.objects.filter(run_id=run.id).exists()
    # The sweep ends it: nothing had succeeded, so there is nothing to compensate.
    assert engine.sweep().past_deadline == [run.id]
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert _statuses(run) == {"hold": "pending", "slow": "pending", "ship": "pending"}


def test_a_step_starts_while_its_runs_deadline_is_ahead():
    run = engine.submit_run(workflow="deadline-order", input={}, deadline=_soon(60))

    engine.execute_step(step_id=_step(run, "hold").id, worker="t")

    assert _step(run, "hold").status == StepStatus.SUCCEEDED
    assert engine.sweep().past_deadline == []


# --- the sweep ending a run ---------------------------------------------------------------
def test_the_sweep_ends_a_run_past_its_deadline_as_a_cancel_with_its_compensations():
    run = engine.submit_run(workflow="deadline-order", input={}, deadline=_soon())
    engine.execute_step(step_id=_step(run, "hold").id, worker="t")
    assert _step(run, "slow").status == StepStatus.QUEUED
    _until_past(run)

    report = engine.sweep()

    assert report.past_deadline == [run.id]
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATING
    shown = f"{run.deadline_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
    assert run.error == f"cancelled by engine: deadline passed (deadline {shown})"
    passed = Event.objects.get(run=run, type=events.RUN_DEADLINE_PASSED)
    assert passed.payload == {"deadline": run.deadline_at.isoformat(), "status": "running"}
    began = Event.objects.get(run=run, type=events.RUN_COMPENSATING)
    assert (began.payload["actor"], began.payload["compensations"]) == ("engine", ["release"])
    assert began.seq == passed.seq + 1

    # The compensation starts although the deadline passed: it undoes the hold.
    engine.execute_step(step_id=_step(run, "release").id, worker="t")

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert _statuses(run) == {
        "hold": "succeeded",
        "slow": "pending",
        "ship": "pending",
        "release": "succeeded",
    }
    (placed,) = FundsHold.objects.filter(run_id=run.id)
    assert placed.released_at is not None
    assert Attempt.objects.filter(run=run, step__key="release").count() == 1
    assert engine.sweep().past_deadline == []


waits = Workflow("deadline-wait", 1)


@waits.wait(signal="go")
def go(ctx: Context) -> None:
    """Waits for a signal that never comes."""


@waits.step(kind=PURE)
def after(ctx: Context) -> None:
    return None


_workflows = declared(waits)


def test_a_waiting_run_past_its_deadline_is_ended_too():
    run = engine.submit_run(workflow="deadline-wait", input={}, deadline=_soon())
    engine.execute_step(step_id=_step(run, "go").id, worker="t")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    _until_past(run)

    assert engine.sweep().past_deadline == [run.id]

    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert _types(run)[-2:] == [events.RUN_DEADLINE_PASSED, events.RUN_CANCELLED]


def test_a_run_a_person_cancelled_before_the_sweep_is_left_as_they_left_it():
    run = engine.submit_run(workflow="quick-one", input={}, deadline=_soon())
    _until_past(run)
    engine.cancel_run(run_id=run.id, actor="ann", reason="not needed")

    assert engine.sweep().past_deadline == []

    run.refresh_from_db()
    assert (run.status, run.error) == (RunStatus.CANCELLED, "cancelled by ann: not needed")
    assert not Event.objects.filter(run=run, type=events.RUN_DEADLINE_PASSED).exists()


@pytest.mark.django_db(transaction=True)
def test_two_sweeps_at_once_end_a_run_past_its_deadline_once():
    run = engine.submit_run(workflow="deadline-order", input={}, deadline=_soon())
    engine.execute_step(step_id=_step(run, "hold").id, worker="t")
    _until_past(run)

    with transaction.atomic():
        first = engine.sweep()  # holds the run's row until this block commits
        other = Background(engine.sweep)
        second = other.join()

    assert (first.past_deadline, second.past_deadline) == ([run.id], [])
    assert engine.sweep().past_deadline == []  # after the commit: nothing left to end
    assert Event.objects.filter(run=run, type=events.RUN_DEADLINE_PASSED).count() == 1
    assert Event.objects.filter(run=run, type=events.RUN_COMPENSATING).count() == 1
    assert Step.objects.filter(run=run, key="release").count() == 1


def test_a_failed_run_past_its_deadline_is_not_retried(monkeypatch):
    monkeypatch.setenv(FAIL_WHILE_FLAGGED, "1")
    run = engine.submit_run(workflow="fails-while-flagged", input={"n": 1}, deadline=_soon())
    engine.execute_step(step_id=_step(run, "call_service").id, worker="t")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    _until_past(run)

    with pytest.raises(StepNotRetryable, match="its deadline passed"):
        engine.retry_steps(run_id=run.id, step_keys=["call_service"], actor="ann")

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert _step(run, "call_service").status == StepStatus.FAILED
