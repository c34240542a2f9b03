"""An operator retries a failed run's failed steps: a new attempt under the
idempotency-key rules, the run reopened, completed effects never repeated."""

from __future__ import annotations

from typing import Any

import pytest

from examples.fakes import CodeHost
from examples.models import Merge, PaymentCharge, PaymentRequest, TargetRecord
from runs import engine
from runs.engine.tools import start_attempt
from runs.errors import RunNotActive, StepNotRetryable
from runs.models import Claim, Event, Run, Step
from runs.record import events
from runs.states import ClaimStatus, RunStatus, StepStatus
from runs.workflows import GUARDED, PURE, TRANSACTIONAL, Context, NotApplied, Retry, Workflow
from tests.support.declared import declared
from tests.support.factories import drain, expire_leases, run_queued

# A guarded merge the code host refuses (before merging) on every attempt the step
# grants: only an operator's retry gets it merged.
refused_merge = Workflow("refused-merge", version=1, input={"change_id": int})


@refused_merge.step(kind=GUARDED, retry=Retry(max_attempts=3, base_delay=0.1, jitter=False))
def merge(ctx: Context) -> dict[str, Any]:
    if ctx.attempt <= 3:
        raise NotApplied("code host refused the request before merging")
    return CodeHost().merge(change_id=ctx.input["change_id"], run_id=ctx.run_id)


# A map whose item 7 fails (both attempts of its batch) until an operator retries it.
picky_map = Workflow("picky-map", version=1, input={"count": int})


@picky_map.step(kind=PURE)
def numbers(ctx: Context) -> list[int]:
    return list(range(1, ctx.input["count"] + 1))


@picky_map.map_step(
    over="numbers", batch_size=5, kind=TRANSACTIONAL, retry=Retry(max_attempts=2, base_delay=0)
)
def copy_number(ctx: Context, number: int) -> None:
    if number == 7 and ctx.attempt <= 2:
        raise ValueError("record 7 is locked by a migration")
    TargetRecord.objects.create(record_id=number, run_id=ctx.run_id)


_workflows = declared(refused_merge, picky_map)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def test_retry_abandoned_idempotent_step_uses_the_same_key_and_charges_once(db):
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    step = step_of(run, "charge")
    for _ in range(step.max_attempts):  # killed after its effect, every time
        started = start_attempt(step_id=step.id, worker="oom")
        from examples.fakes import PaymentAPI

        PaymentAPI().charge(amount=5, idempotency_key=started.claim.key)
        expire_leases()
        engine.sweep()
    claim = Claim.objects.get(run=run)
    assert (Run.objects.get(pk=run.id).status, claim.status) == (
        RunStatus.FAILED,
        ClaimStatus.ABANDONED,
    )

    plan = engine.preview_retry(run_id=run.id, step_keys=["charge"])
    assert plan.steps == (
        ("charge", "idempotent", f"the same key {claim.key} (the external system dedupes it)"),
    )
    engine.retry_steps(run_id=run.id, step_keys=["charge"], actor="ann")
    run = drain(run)

    assert run.status == RunStatus.SUCCEEDED
    assert list(Claim.objects.filter(run=run).values_list("key", "status")) == [
        (claim.key, ClaimStatus.SUCCEEDED)
    ]
    assert PaymentCharge.objects.filter(idempotency_key=claim.key).count() == 1
    assert PaymentRequest.objects.filter(idempotency_key=claim.key).count() == 6
    step = step_of(run, "charge")
    assert (step.attempts, step.max_attempts) == (6, 10)
    reopened = Event.objects.get(run=run, type=events.RUN_REOPENED)
    assert reopened.payload == {
        "actor": "ann",
        "steps": ["charge"],
        "status": "running",
        "max_attempts": {"charge": 5},
    }


def test_retry_guarded_step_whose_effect_did_not_happen_takes_a_new_key(db):
    run = engine.submit_run(workflow=refused_merge.name, input={"change_id": 3})
    run = drain(run)
    assert run.status == RunStatus.FAILED
    first = Claim.objects.get(run=run)
    assert first.status == ClaimStatus.FAILED

    engine.retry_steps(run_id=run.id, step_keys=["merge"], actor="ann")
    run = drain(run)

    assert run.status == RunStatus.SUCCEEDED
    assert Merge.objects.filter(run_id=run.id).count() == 1
    assert list(Claim.objects.filter(run=run).order_by("id").values_list("key", "status")) == [
        (first.key, ClaimStatus.FAILED),
        (f"{first.key}/retry-2", ClaimStatus.SUCCEEDED),
    ]


def test_retry_failed_batch_skips_completed_items_and_repeats_none(db):
    run = engine.submit_run(workflow=picky_map.name, input={"count": 12})
    run = drain(run)
    assert run.status == RunStatus.FAILED
    assert step_of(run, "copy_number[1]").status == StepStatus.FAILED  # items 6..10
    assert step_of(run, "copy_number[2]").status == StepStatus.QUEUED  # never started
    assert TargetRecord.objects.filter(run_id=run.id).count() == 6  # 1..5 and 6

    plan = engine.preview_retry(run_id=run.id, step_keys=["copy_number"])
    assert [key for key, _, _ in plan.steps] == ["copy_number[1]"]
    assert {(e.step, e.items) for e in plan.done} == {("copy_number", 6)}

    engine.retry_steps(run_id=run.id, step_keys=["copy_number"], actor="ann")
    run = drain(run)

    assert run.status == RunStatus.SUCCEEDED
    rows = TargetRecord.objects.filter(run_id=run.id)
    assert rows.count() == 12
    assert rows.values("record_id").distinct().count() == 12


def test_retry_queues_steps_that_became_ready_while_the_run_had_failed(db):
    run = engine.submit_run(workflow="fork-fail", input={})
    steady = start_attempt(step_id=step_of(run, "steady").id, worker="w")
    engine.execute_step(step_id=step_of(run, "doomed_branch").id, worker="w")
    assert Run.objects.get(pk=run.id).status == RunStatus.FAILED
    from runs.engine.tools import finish_with_result

    finish_with_result(steady, "steady")  # finishes while the run is failed
    assert step_of(run, "after_steady").status == StepStatus.PENDING

    engine.retry_steps(run_id=run.id, step_keys=["doomed_branch"], actor="ann")

    assert step_of(run, "after_steady").status == StepStatus.QUEUED
    run = drain(run)
    assert run.status == RunStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("keys", "error", "message"),
    [
        (["nope"], StepNotRetryable, "has no failed step nope"),
        ([], StepNotRetryable, "other failed steps"),
    ],
)
def test_retry_refusals_change_nothing(db, keys, error, message):
    run = drain(engine.submit_run(workflow=refused_merge.name, input={"change_id": 3}))
    before = Event.objects.count()
    with pytest.raises(error, match=message):
        engine.retry_steps(run_id=run.id, step_keys=keys, actor="ann")
    assert (Run.objects.get(pk=run.id).status, Event.objects.count()) == (
        RunStatus.FAILED,
        before,
    )


def test_retry_of_a_run_that_did_not_fail_is_refused(db):
    run = engine.submit_run(workflow="pure-chain", input={})
    run_queued(run)
    with pytest.raises(RunNotActive, match="only a failed run's steps are retried"):
        engine.retry_steps(run_id=run.id, step_keys=["first"], actor="ann")
