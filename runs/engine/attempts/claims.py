"""Inserting claims whose transaction stays open for the whole effect (transactional
steps and items).

The claim's UNIQUE key is the arbiter: a second session inserting the same key waits
for the first to commit or roll back. If the first belongs to a worker that is paused
or cut off from the network, that wait could last until PostgreSQL notices the dead
session (idle_in_transaction_session_timeout, TCP keepalives: config/settings.py), and
each retry would burn an attempt on it. So the insert waits at most
RUNS_CLAIM_LOCK_TIMEOUT_SECONDS, then gives way with ClaimBusy: the attempt is
deferred (retried later without counting against max_attempts).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import OperationalError, connection
from psycopg import errors as pg_errors

from runs import sql
from runs.engine.core.keys import step_claim_key
from runs.errors import ClaimBusy, ClaimNotTakeable
from runs.models import Attempt, Claim, Run, Step
from runs.record import events
from runs.sql import prepared
from runs.states import ClaimStatus
from runs.workflows.definition import StepDef
from runs.workflows.limits import keyed

SQL = sql.load(__file__)
# The claims a retry of the same logical invocation may take over (claims.sql, take).
RETAKEABLE = [ClaimStatus.IN_FLIGHT, ClaimStatus.ABANDONED]


def insert_claim(
    *,
    key: str,
    run_id: uuid.UUID,
    step_id: int,
    item_key: str | None,
    kind: str,
    attempt_id: int,
    status: ClaimStatus = ClaimStatus.IN_FLIGHT,
    new: bool = False,
) -> int | None:
    """INSERT an in-flight claim in the current transaction; its id, or None if the key
    is already claimed (committed by an earlier attempt). Raises ClaimBusy if another
    session's open transaction holds the key for longer than the lock timeout.

    The wait for a key another transaction holds is bounded for this statement only
    (claims.sql, insert_bounded).

    `status`: a map item inserts its claim already `succeeded` (items.py): no other
    session can see the row before this transaction commits, and it commits only with
    the effect.

    `new`: no earlier attempt can have committed the key (a map batch's first attempt),
    so the insert goes without ON CONFLICT, whose speculative insertion costs a second
    WAL record; a taken key then raises IntegrityError (the unique key still decides)
    instead of answering None. The wait stays bounded either way."""
    timeout_ms = int(float(settings.RUNS_CLAIM_LOCK_TIMEOUT_SECONDS) * 1000)
    try:
        with prepared.cursor() as cursor:
            cursor.execute(
                SQL["insert_bounded_new" if new else "insert_bounded"],
                {
                    "key": key,
                    "run": run_id,
                    "step": step_id,
                    "item": item_key,
                    "kind": kind,
                    "status": status,
                    "attempt": attempt_id,
                    "completed": status == ClaimStatus.SUCCEEDED,
                    "lock_timeout": f"{timeout_ms}ms",
                },
            )
            row = cursor.fetchone()
            if row is None:
                cursor.execute(SQL["restore_lock_timeout"])
    except OperationalError as exc:
        if isinstance(exc.__cause__, pg_errors.LockNotAvailable):
            raise ClaimBusy(
                f"claim {key} is held by another session's open transaction (a paused or "
                f"partitioned worker?) for more than {timeout_ms / 1000:g}s"
            ) from exc
        raise
    return None if row is None else int(row[0])


def take_claim(
    *, run: Run, step: Step, stepdef: StepDef, attempt: Attempt, item: str | None
) -> Claim:
    """Take (or, on a retry of the same logical invocation, take over) the claim.

    The key's uniqueness is the arbiter (claims.sql, take); a claim that succeeded,
    failed or is unresolved is never taken again (ClaimNotTakeable)."""
    key = step_claim_key(run, step, stepdef)
    with connection.cursor() as cursor:
        cursor.execute(
            SQL["take"],
            {
                "key": key,
                "run": run.id,
                "step": step.id,
                "item": item,
                "kind": step.kind,
                "in_flight": ClaimStatus.IN_FLIGHT,
                "attempt": attempt.id,
                "retakeable": RETAKEABLE,
                "hold_key": keyed(stepdef.hold, run.input) if stepdef.hold and not item else "",
            },
        )
        row = cursor.fetchone()
    if row is None:
        existing = Claim.objects.get(key=key)
        raise ClaimNotTakeable(f"claim {key} is {existing.status}; the engine will not retake it")
    claim = Claim(
        id=row[0],
        key=key,
        run_id=run.id,
        step_id=step.id,
        item_key=item,
        kind=step.kind,
        status=ClaimStatus.IN_FLIGHT,
        attempt_id=attempt.id,
    )
    events.append_event(
        run.id,
        events.ClaimTaken(key=key, retaken=not row[1]),
        step_id=step.id,
        attempt_number=attempt.number,
    )
    return claim
