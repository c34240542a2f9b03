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

import logging
import uuid

from django.conf import settings
from django.db import OperationalError, connection
from psycopg import errors as pg_errors

from runs import events, prepared
from runs.engine.core.keys import step_claim_key
from runs.errors import ClaimBusy, ClaimNotTakeable
from runs.models import Attempt, Claim, Run, Step
from runs.states import (
    ClaimStatus,
)
from runs.workflows.definition import StepDef

log = logging.getLogger(__name__)


# After a taken key: what the transaction goes on with (the retake of an idempotent
# item waits for row locks) must not be bounded by the claim's lock timeout.
_RESTORE_LOCK_TIMEOUT = (
    "SELECT set_config('lock_timeout', current_setting('runs.lock_timeout_before'), true)"
)


def insert_claim(
    *,
    key: str,
    run_id: uuid.UUID,
    step_id: int,
    item_key: str | None,
    kind: str,
    attempt_id: int,
    status: ClaimStatus = ClaimStatus.IN_FLIGHT,
) -> int | None:
    """INSERT an in-flight claim in the current transaction; its id, or None if the key
    is already claimed (committed by an earlier attempt). Raises ClaimBusy if another
    session's open transaction holds the key for longer than the lock timeout.

    lock_timeout is set for this statement's wait only: the subquery saves the
    transaction's value and sets the bound (both local to the transaction) before the
    insert can wait, and RETURNING restores the saved value, so the step's own effect
    runs with whatever lock_timeout it had. A taken key returns no row, so RETURNING
    does not run: a second statement restores it then (not on the common path).

    `status`: a map item inserts its claim already `succeeded` (mapping.py): no other
    session can see the row before this transaction commits, and it commits only with
    the effect."""
    timeout_ms = int(float(settings.RUNS_CLAIM_LOCK_TIMEOUT_SECONDS) * 1000)
    try:
        with prepared.cursor() as cursor:
            cursor.execute(
                """
                INSERT INTO runs_claim (key, run_id, step_id, item_key, kind, status,
                                        attempt_id, error, resolved_by, resolution_note,
                                        created_at, completed_at)
                SELECT %s, %s, %s, %s, %s, %s, %s, '', '', '', now(),
                       CASE WHEN %s = %s THEN now() END
                FROM (SELECT set_config('lock_timeout', %s, true)
                      FROM (SELECT set_config('runs.lock_timeout_before',
                                              current_setting('lock_timeout'), true))
                           AS saved) AS bounded_wait
                ON CONFLICT (key) DO NOTHING
                RETURNING id, set_config('lock_timeout',
                                         current_setting('runs.lock_timeout_before'), true)
                """,
                [
                    key,
                    run_id,
                    step_id,
                    item_key,
                    kind,
                    status,
                    attempt_id,
                    status,
                    ClaimStatus.SUCCEEDED,
                    f"{timeout_ms}ms",
                ],
            )
            row = cursor.fetchone()
            if row is None:
                cursor.execute(_RESTORE_LOCK_TIMEOUT)
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

    INSERT … ON CONFLICT makes the key's uniqueness the arbiter: a retry re-owns an
    in-flight claim with the same key, or an abandoned one (an idempotent step that gave
    up, retried by an operator: the same key is what makes that safe); a claim that
    succeeded, failed or is unresolved is never taken again (ClaimNotTakeable)."""
    key = step_claim_key(run, step, stepdef)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO runs_claim (key, run_id, step_id, item_key, kind, status, attempt_id,
                                    error, resolved_by, resolution_note, created_at)
            VALUES (%s, %s, %s, %s, %s, %s, %s, '', '', '', now())
            ON CONFLICT (key) DO UPDATE
                SET attempt_id = EXCLUDED.attempt_id, status = EXCLUDED.status, error = '',
                    completed_at = NULL
                WHERE runs_claim.status IN (%s, %s)
            RETURNING id, (xmax = 0) AS inserted
            """,
            [
                key,
                run.id,
                step.id,
                item,
                step.kind,
                ClaimStatus.IN_FLIGHT,
                attempt.id,
                ClaimStatus.IN_FLIGHT,
                ClaimStatus.ABANDONED,
            ],
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
        events.CLAIM_TAKEN,
        step_id=step.id,
        attempt_number=attempt.number,
        key=key,
        retaken=not row[1],
    )
    return claim
