"""A claim insert bounds its own wait for the key and nothing else (runs/engine/attempts/claims.py):
whether it inserted the claim or found the key taken, the transaction goes on with
the lock_timeout it had."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models.functions import Now

from runs import engine
from runs.engine.tools import faults, insert_claim, start_attempt
from runs.models import Attempt, Claim, Run, Step
from runs.states import AttemptStatus, ClaimStatus
from runs.workflows import IDEMPOTENT, PURE, Context, Retry, Workflow
from tests.support.declared import registered
from tests.support.factories import expire_leases
from tests.support.races import Background
from tests.support.waiting import wait_for


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def lock_timeout() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW lock_timeout")
        return str(cursor.fetchone()[0])


@pytest.mark.django_db
@pytest.mark.parametrize("before", [None, "7s"], ids=["session default", "set by the caller"])
def test_lock_timeout_is_as_before_after_a_claim_insert_and_after_a_key_conflict(settings, before):
    settings.RUNS_CLAIM_LOCK_TIMEOUT_SECONDS = 0.3
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    step = step_of(run, "charge")
    started = start_attempt(step_id=step.id, worker="w")
    assert started is not None
    claim: dict[str, Any] = {
        "key": f"{run.id}/test-claim",
        "run_id": run.id,
        "step_id": step.id,
        "item_key": None,
        "kind": step.kind,
        "attempt_id": started.attempt.id,
    }
    with transaction.atomic():
        if before is not None:
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = %s", [before])
        expected = lock_timeout()
        assert insert_claim(**claim) is not None
        assert lock_timeout() == expected
        assert insert_claim(**claim) is None  # the key is taken
        assert lock_timeout() == expected


@pytest.fixture
def idempotent_map() -> Iterator[Workflow]:
    """An idempotent map step, registered only for one test."""
    wf = Workflow("charge-each", version=1, input={"amounts": list})

    @wf.step(kind=PURE)
    def amounts(ctx: Context) -> list[int]:
        return list(ctx.input["amounts"])

    @wf.map_step(over="amounts", batch_size=10, kind=IDEMPOTENT, retry=Retry(max_attempts=3))
    def charge_each(ctx: Context, amount: int) -> dict[str, int]:
        return {"charged": amount}

    with registered(wf):
        yield wf


def waited_longer_than(pid: int, seconds: float) -> bool:
    """True while backend `pid` waits for a lock it has waited for more than `seconds`
    (database clock; asked on a connection of its own, like races.is_waiting_on_lock)."""
    params = connection.get_connection_params()
    raw = connection.get_new_connection(params)
    try:
        raw.autocommit = True
        row = raw.execute(
            "SELECT bool_or(clock_timestamp() - waitstart > make_interval(secs => %s)) "
            "FROM pg_locks WHERE pid = %s AND NOT granted",
            [seconds, pid],
        ).fetchone()
    finally:
        raw.close()
    return bool(row and row[0])


@pytest.mark.django_db(transaction=True)
def test_an_idempotent_item_retaken_after_a_key_conflict_waits_for_a_row_lock(
    settings, idempotent_map
):
    """A retried batch finds its item's claim taken (in flight: the first attempt died
    after claiming it) and retakes it. The retake waits for another session's lock on
    the claim row like any statement, not only as long as a claim insert may wait."""
    settings.RUNS_CLAIM_LOCK_TIMEOUT_SECONDS = 0.3
    run = engine.submit_run(workflow="charge-each", input={"amounts": [5]})
    engine.execute_step(step_id=step_of(run, "amounts").id, worker="t")
    batch = step_of(run, "charge_each[0]")
    faults.simulate({("after_claim", "charge_each"): 1})
    try:
        with pytest.raises(faults.SimulatedCrash):
            engine.execute_step(step_id=batch.id, worker="dead")
    finally:
        faults.simulate(None)
    expire_leases()
    assert engine.sweep().crashed
    claim = Claim.objects.get(run=run)
    assert claim.status == ClaimStatus.IN_FLIGHT
    Step.objects.filter(pk=batch.id).update(next_attempt_at=Now())  # the retry is due

    locked, release = threading.Event(), threading.Event()

    def hold_the_claim_row() -> None:
        with transaction.atomic():
            Claim.objects.select_for_update().get(pk=claim.pk)
            locked.set()
            release.wait(60)

    holder = Background(hold_the_claim_row)
    assert locked.wait(10)
    try:
        attempt = Background(lambda: engine.execute_step(step_id=batch.id, worker="w"))
        assert attempt.pid is not None
        wait_for(
            lambda: not attempt.thread.is_alive() or waited_longer_than(attempt.pid, 0.3),
            timeout=10,
            what="the retake waiting for the claim row past the claim lock timeout",
        )
    finally:
        release.set()
        holder.join()
    assert attempt.join() == "succeeded"
    claim.refresh_from_db()
    assert (claim.status, claim.result) == (ClaimStatus.SUCCEEDED, {"charged": 5})
    assert list(
        Attempt.objects.filter(step=batch).order_by("number").values_list("status", flat=True)
    ) == [AttemptStatus.CRASHED, AttemptStatus.SUCCEEDED]
