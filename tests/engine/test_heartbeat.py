"""ctx.heartbeat() inside an effect's transaction (a transactional step, a transactional
map item) renews the lease without keeping the attempt row locked until that
transaction ends: a worker paused after a heartbeat (GC, a frozen VM) must not keep the
sweeper, which skips locked attempts, from recovering its attempt."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction

from examples.models import TargetRecord
from runs import engine
from runs.engine.tools import context_factory, heartbeat, recover_attempt, start_attempt
from runs.errors import AttemptFenced
from runs.models import Attempt, Claim, Step
from runs.states import AttemptStatus, StepStatus
from runs.workflows import TRANSACTIONAL, Context, Retry, Workflow
from tests.support import workflows as test_workflows
from tests.support.declared import declared
from tests.support.factories import expire_leases
from tests.support.races import Background

pytestmark = pytest.mark.django_db(transaction=True)

# A transactional step that writes, heartbeats and pauses inside its transaction
# (test_workflows.PAUSES, shared with the map beside it, heartbeat-map).
heartbeat_write = Workflow("heartbeat-write", version=1, input={})


@heartbeat_write.step(kind=TRANSACTIONAL, retry=Retry(max_attempts=3))
def write_then_pause(ctx: Context) -> dict[str, Any]:
    test_workflows.write_heartbeat_pause(ctx, 1)
    return {"written": 1}


_workflows = declared(heartbeat_write)


def expire_lease_unless_locked(attempt_id: int) -> None:
    """The attempt's lease ended a second ago (database clock), if no other session
    holds its row (the sweeper's view: a locked attempt is skipped, not waited for)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_attempt SET lease_expires_at = now() - interval '1 second' "
            "WHERE id IN (SELECT id FROM runs_attempt WHERE id = %s FOR UPDATE SKIP LOCKED)",
            [attempt_id],
        )


def paused_after_heartbeat(run, step: Step) -> tuple[Background, threading.Event, Attempt]:
    paused, release = threading.Event(), threading.Event()
    test_workflows.PAUSES[str(run.id)] = (paused, release)
    worker = Background(lambda: engine.execute_step(step_id=step.id, worker="paused"))
    assert paused.wait(10), "the step did not reach its pause"
    return worker, release, Attempt.objects.get(step=step)


def test_a_paused_transactional_step_is_recovered_and_its_finish_fenced():
    run = engine.submit_run(workflow=heartbeat_write.name, input={})
    step = Step.objects.get(run=run)
    worker, release, attempt = paused_after_heartbeat(run, step)
    try:
        expire_lease_unless_locked(attempt.id)
        assert recover_attempt(attempt_id=attempt.id), "the attempt's row is locked"
    finally:
        release.set()
        worker.thread.join(30)

    assert worker.join() == "fenced"  # its finish lost the fence and rolled back
    assert not TargetRecord.objects.filter(run_id=run.id).exists()
    assert not Claim.objects.filter(run=run).exists()
    attempt.refresh_from_db()
    step.refresh_from_db()
    assert (attempt.status, step.status) == (AttemptStatus.CRASHED, StepStatus.QUEUED)


def test_a_paused_transactional_map_item_is_recovered_and_rolled_back():
    run = engine.submit_run(workflow="heartbeat-map", input={})
    engine.execute_step(step_id=Step.objects.get(run=run, key="one_item").id, worker="t")
    batch = Step.objects.get(run=run, key="write_item_then_pause[0]")
    worker, release, attempt = paused_after_heartbeat(run, batch)
    try:
        expire_lease_unless_locked(attempt.id)
        assert recover_attempt(attempt_id=attempt.id), "the attempt's row is locked"
    finally:
        release.set()
        worker.thread.join(30)

    assert worker.join() == "fenced"  # the item's commit was refused
    assert not TargetRecord.objects.filter(run_id=run.id).exists()
    assert not Claim.objects.filter(step=batch).exists()
    attempt.refresh_from_db()
    batch.refresh_from_db()
    assert (attempt.status, batch.status) == (AttemptStatus.CRASHED, StepStatus.QUEUED)


def test_a_heartbeat_in_a_transaction_renews_at_once_and_only_a_live_lease():
    run = engine.submit_run(workflow=heartbeat_write.name, input={})
    started = start_attempt(step_id=Step.objects.get(run=run).id, worker="w")
    beat = context_factory(started)(key=None).heartbeat

    def lease():
        return Attempt.objects.values_list("lease_expires_at", flat=True).get(pk=started.attempt.id)

    try:
        before = lease()
        with transaction.atomic():
            beat()
            transaction.set_rollback(True)  # the effect's transaction rolls back...
        assert lease() > before  # ...the renewal stands: it was committed on its own

        expire_leases()
        with pytest.raises(AttemptFenced), transaction.atomic():
            beat()  # a lost lease is not renewed, whatever the worker's clock says
        assert Attempt.objects.get(pk=started.attempt.id).status == AttemptStatus.RUNNING
    finally:
        heartbeat.close()
