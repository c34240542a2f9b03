"""Engine rules exercised in-process against real PostgreSQL (no worker needed):
conditional starts, fencing of late finishes, recovery by effect kind."""

from __future__ import annotations

import pytest
from django.db import connection

from examples.models import Merge, TargetRecord
from runs import engine
from runs.engine.tools import fail_attempt, finish_with_result, run_batch, start_attempt
from runs.errors import AttemptFenced
from runs.models import Attempt, Claim, Run, Step
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from tests.support.factories import enter_effect


def expire_leases() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_attempt SET lease_expires_at = now() - interval '1 second' "
            "WHERE status = 'running'"
        )


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def test_start_attempt_only_one_delivery_wins(db):
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    step = step_of(run, "charge")

    first = start_attempt(step_id=step.id, worker="a")
    second = start_attempt(step_id=step.id, worker="b")

    assert first is not None and second is None
    assert Attempt.objects.filter(step=step).count() == 1
    step.refresh_from_db()
    assert (step.status, step.attempts, step.current_attempt_id) == (
        StepStatus.RUNNING,
        1,
        first.attempt.id,
    )
    assert Run.objects.get(pk=run.id).status == RunStatus.RUNNING


def test_execute_step_runs_whole_run_inline(db):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 9})
    assert engine.execute_step(step_id=step_of(run, "merge").id, worker="t") == "succeeded"
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.result == {"merge": {"merge_id": Merge.objects.get().id, "change_id": 9}}
    assert Merge.objects.count() == 1


def test_late_finish_after_crash_changes_nothing(db):
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    started = start_attempt(step_id=step_of(run, "charge").id, worker="zombie")
    expire_leases()
    report = engine.sweep()
    assert report.crashed == [started.attempt.id]

    with pytest.raises(AttemptFenced):
        finish_with_result(started, {"charge_id": 1})

    step = step_of(run, "charge")
    assert (step.status, step.result) == (StepStatus.QUEUED, None)
    assert Attempt.objects.get(pk=started.attempt.id).status == AttemptStatus.CRASHED
    assert Claim.objects.get(run=run).status == ClaimStatus.IN_FLIGHT


def test_late_finish_with_expired_lease_is_fenced_even_before_sweep(db):
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    started = start_attempt(step_id=step_of(run, "charge").id, worker="slow")
    expire_leases()
    with pytest.raises(AttemptFenced):
        finish_with_result(started, {"charge_id": 1})
    assert step_of(run, "charge").status == StepStatus.RUNNING


def test_redelivery_takes_over_expired_attempt(db):
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    step = step_of(run, "charge")
    dead = start_attempt(step_id=step.id, worker="dead")
    expire_leases()

    again = start_attempt(step_id=step.id, worker="alive")

    assert again is not None and again.attempt.number == 2
    assert Attempt.objects.get(pk=dead.attempt.id).status == AttemptStatus.CRASHED
    # The retry re-owns the same claim: same idempotency key.
    assert again.claim.key == dead.claim.key
    assert Claim.objects.filter(run=run).count() == 1


def test_zombie_transactional_item_rolls_back_whole(db):
    run = engine.submit_run(workflow="migrate-records", input={"count": 4, "batch_size": 2})
    engine.execute_step(step_id=step_of(run, "list_records").id, worker="t")
    batch = step_of(run, "migrate[0]")
    started = start_attempt(step_id=batch.id, worker="zombie")
    expire_leases()
    engine.sweep()

    from runs.engine.tools import context_factory

    with pytest.raises(AttemptFenced):
        run_batch(started, context_factory(started))

    assert TargetRecord.objects.count() == 0
    assert not Claim.objects.filter(run=run).exists()


def test_guarded_crash_becomes_unresolved_never_retried(db):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 3})
    started = start_attempt(step_id=step_of(run, "merge").id, worker="dead")
    enter_effect(started)  # it died inside the effect
    expire_leases()
    engine.sweep()

    run.refresh_from_db()
    assert run.status == RunStatus.NEEDS_RECONCILIATION
    assert step_of(run, "merge").status == StepStatus.UNRESOLVED
    assert Claim.objects.get(run=run).status == ClaimStatus.UNRESOLVED
    assert start_attempt(step_id=started.step.id, worker="other") is None
    assert Attempt.objects.filter(run=run).count() == 1


def test_guarded_exception_unresolved_and_not_applied_retries(db):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 3})
    step = step_of(run, "merge")
    started = start_attempt(step_id=step.id, worker="t")
    assert fail_attempt(started, error="NotApplied", uncertain=False) == "retrying"
    step.refresh_from_db()
    assert step.status == StepStatus.RETRYING

    run2 = engine.submit_run(workflow="merge-change", input={"change_id": 4})
    started2 = start_attempt(step_id=step_of(run2, "merge").id, worker="t")
    assert fail_attempt(started2, error="TimeoutError", uncertain=True) == "unresolved"
    assert Claim.objects.get(run=run2).status == ClaimStatus.UNRESOLVED
    assert Run.objects.get(pk=run2.id).status == RunStatus.NEEDS_RECONCILIATION


@pytest.mark.parametrize(
    ("uncertain", "claim_status"),
    # An idempotent effect that raised may have happened: its claim is abandoned (safe
    # to retry with the same key), never `failed`, which means "did not happen".
    [(True, ClaimStatus.ABANDONED), (False, ClaimStatus.FAILED)],
)
def test_failure_retries_then_fails_run_when_attempts_exhausted(db, uncertain, claim_status):
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    step = step_of(run, "charge")
    for n in range(1, step.max_attempts + 1):
        Step.objects.filter(pk=step.id).update(next_attempt_at=None)
        if n > 1:
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE runs_step SET next_attempt_at = now() WHERE id = %s", [step.id]
                )
        started = start_attempt(step_id=step.id, worker="t")
        assert started is not None, n
        outcome = fail_attempt(started, error="boom", uncertain=uncertain)
        assert outcome == ("failed" if n == step.max_attempts else "retrying")
    run.refresh_from_db()
    assert (run.status, step_of(run, "charge").status) == (RunStatus.FAILED, StepStatus.FAILED)
    assert Claim.objects.get(run=run).status == claim_status
    assert "step charge failed: boom" in run.error


def test_lost_message_is_republished_by_sweep(db, settings):
    settings.RUNS_REPUBLISH_AFTER_SECONDS = 0
    run = engine.submit_run(workflow="merge-change", input={"change_id": 3})
    report = engine.sweep()
    assert report.republished == [step_of(run, "merge").id]


@pytest.mark.django_db(transaction=True)
def test_concurrent_sweepers_crash_each_expired_attempt_exactly_once():
    import threading

    from runs.models import Event
    from runs.record import events

    runs = [engine.submit_run(workflow="charge-payment", input={"amount": n}) for n in range(1, 21)]
    for run in runs:
        start_attempt(step_id=step_of(run, "charge").id, worker="dead")
    expire_leases()
    barrier = threading.Barrier(4)
    crashed: list[int] = []

    def sweeper() -> None:
        barrier.wait()
        try:
            crashed.extend(engine.sweep(limit=7).crashed)
            crashed.extend(engine.sweep(limit=7).crashed)
        finally:
            connection.close()

    threads = [threading.Thread(target=sweeper) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(crashed) == sorted(Attempt.objects.values_list("id", flat=True))
    assert Event.objects.filter(type=events.ATTEMPT_CRASHED).count() == 20
    assert set(Step.objects.values_list("status", flat=True)) == {StepStatus.QUEUED}
