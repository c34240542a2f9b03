"""Version skew: a process without a run's workflow version never reads that as
"nothing to do". What needs the definition (which steps to undo, how many attempts a
retry grants, what follows a resolution) is refused with `workflow_version_unknown` and
changes nothing, or left to a worker that knows the version; what does not need it goes
ahead (docs/reliability.md#version-skew)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.http import QueryDict

from runs import engine
from runs.batches import service
from runs.engine.tools import fail_attempt, finish_with_result, start_attempt
from runs.errors import WorkflowVersionUnknown
from runs.models import Attempt, BatchItem, Claim, Event, Run, Step
from runs.states import AttemptStatus, BatchItemStatus, ClaimStatus, RunStatus, StepStatus
from runs.workflows import registry
from tests.support.declared import withheld
from tests.support.factories import enter_effect, expire_leases, run_queued


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


@contextmanager
def another_release(name: str, version: int = 1) -> Iterator[None]:
    """While inside, this process is of a release that lacks `name` v`version`."""
    workflow = registry.get(name, version)
    assert workflow is not None, f"{name} v{version} is not registered"
    with withheld(workflow):
        yield


def _events(run: Run) -> int:
    return Event.objects.filter(run=run).count()


def _seat_held_charge_running() -> tuple[Run, object]:
    run = engine.submit_run(workflow="refundable-charge", input={})
    engine.execute_step(step_id=step_of(run, "hold_seat").id, worker="old")
    started = start_attempt(step_id=step_of(run, "charge_card").id, worker="old")
    assert started is not None
    return run, started


def test_a_cancel_without_the_version_is_refused_once_a_step_succeeded(db):
    """Before the fix the cancel read "unknown" as "nothing to compensate": the run
    ended cancelled and the held seat was never released."""
    run, _ = _seat_held_charge_running()
    before = _events(run)
    with another_release("refundable-charge"), pytest.raises(WorkflowVersionUnknown) as e:
        engine.cancel_run(run_id=run.id, actor="ann")
    assert e.value.code == "workflow_version_unknown"
    assert "refundable-charge v1" in str(e.value)
    run.refresh_from_db()
    assert (run.status, _events(run)) == (RunStatus.RUNNING, before)

    engine.cancel_run(run_id=run.id, actor="ann")  # from a process of the old release
    assert Run.objects.get(pk=run.id).status == RunStatus.COMPENSATING
    assert step_of(run, "release_seat").status == StepStatus.QUEUED


def test_a_cancel_without_the_version_goes_ahead_when_nothing_succeeded(db):
    run = engine.submit_run(workflow="refundable-charge", input={})
    with another_release("refundable-charge"):
        engine.cancel_run(run_id=run.id, actor="ann")
    assert Run.objects.get(pk=run.id).status == RunStatus.CANCELLED


def test_the_sweeper_without_the_version_leaves_a_last_crash_to_a_worker_that_knows_it(db):
    """The charge's last attempt crashed; the run must fail and release the seat.
    Before the fix a sweeper of a newer release failed the run with nothing undone."""
    run, started = _seat_held_charge_running()
    Step.objects.filter(pk=started.step.id).update(max_attempts=1)
    expire_leases()
    with another_release("refundable-charge"):
        report = engine.sweep()
    assert report.crashed == []
    assert Attempt.objects.get(pk=started.attempt.id).status == AttemptStatus.RUNNING
    assert Run.objects.get(pk=run.id).status == RunStatus.RUNNING

    assert engine.sweep().crashed == [started.attempt.id]
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATING
    assert step_of(run, "release_seat").status == StepStatus.QUEUED
    # The charge names a refund and its outcome is unknown: a person decides it.
    assert step_of(run, "charge_card").status == StepStatus.UNRESOLVED


def test_a_resolution_as_succeeded_without_the_version_is_refused_for_a_stopped_run(db):
    """A cancelled run's guarded deploy (which names a roll-back) is resolved as
    succeeded: its roll-back must run. Before the fix a process without the version
    recorded the success and planned nothing."""
    run = engine.submit_run(workflow="compensated-deploy", input={})
    started = start_attempt(step_id=step_of(run, "deploy_release").id, worker="w")
    assert started is not None
    enter_effect(started)
    assert fail_attempt(started, error="TimeoutError", uncertain=True) == "unresolved"
    engine.cancel_run(run_id=run.id, actor="ann")
    claim = Claim.objects.get(run=run)
    before = _events(run)
    with another_release("compensated-deploy"), pytest.raises(WorkflowVersionUnknown):
        engine.resolve_claim(claim.id, ClaimStatus.SUCCEEDED, actor="ops", note="it is live")
    assert Claim.objects.get(pk=claim.id).status == ClaimStatus.UNRESOLVED
    assert _events(run) == before
    with another_release("compensated-deploy"):
        [preview] = engine.preview_resolutions(claim_ids=[claim.id], outcome=ClaimStatus.SUCCEEDED)
    assert preview.action == "refused"

    engine.resolve_claim(claim.id, ClaimStatus.SUCCEEDED, actor="ops", note="it is live")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATING
    engine.execute_step(step_id=step_of(run, "roll_back").id, worker="old")
    assert step_of(run, "roll_back").status == StepStatus.SUCCEEDED
    assert Run.objects.get(pk=run.id).status == RunStatus.CANCELLED


def test_a_retry_without_the_version_is_refused_and_never_strands_the_join(db):
    """One branch failed the run while the other was running and then succeeded; the
    join waits on both. Before the fix a retry from a process without the version
    granted one attempt and never recounted the join's dependencies: the run went
    `running` with the join pending for ever."""
    run = engine.submit_run(workflow="fork-join", input={})
    late = start_attempt(step_id=step_of(run, "late_branch").id, worker="w")
    assert late is not None
    engine.execute_step(step_id=step_of(run, "failing_branch").id, worker="w")
    finish_with_result(late, "late")
    assert Run.objects.get(pk=run.id).status == RunStatus.FAILED
    before = _events(run)
    with another_release("fork-join"):
        with pytest.raises(WorkflowVersionUnknown):
            engine.preview_retry(run_id=run.id, step_keys=["failing_branch"])
        with pytest.raises(WorkflowVersionUnknown):
            engine.retry_steps(run_id=run.id, step_keys=["failing_branch"], actor="ann")
    assert (Run.objects.get(pk=run.id).status, _events(run)) == (RunStatus.FAILED, before)

    engine.retry_steps(run_id=run.id, step_keys=["failing_branch"], actor="ann")
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert step_of(run, "join").status == StepStatus.SUCCEEDED


def test_a_signal_without_the_version_is_refused_as_unknown_version_not_unknown_signal(db):
    run = engine.submit_run(workflow="wait-approval", input={"order": 1})
    run_queued(run)
    with another_release("wait-approval"), pytest.raises(WorkflowVersionUnknown):
        engine.send_signal(run_id=run.id, name="approval", actor="ann")


def test_a_bulk_cancel_on_a_process_without_the_version_refuses_that_run_and_goes_on(db):
    """The batch's worker may be of another release: the run it cannot judge is refused
    (with the engine's reason), the others are cancelled, and nothing is lost."""
    held, _ = _seat_held_charge_running()
    fresh = engine.submit_run(workflow="refundable-charge", input={})
    batch = service.create_batch(
        operation="cancel",
        params=QueryDict("workflow=refundable-charge"),
        actor="ann",
        reason="the venue closed",
    )
    with another_release("refundable-charge"):
        service.process(batch.id)
    items = {i.run_id: (i.status, i.message) for i in BatchItem.objects.filter(batch=batch)}
    assert items[fresh.id] == (BatchItemStatus.APPLIED, "cancelled")
    status, message = items[held.id]
    assert status == BatchItemStatus.REFUSED
    assert "does not know workflow refundable-charge v1" in message
    assert Run.objects.get(pk=held.id).status == RunStatus.RUNNING
