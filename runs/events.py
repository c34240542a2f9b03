"""append_event(): the only writer of the event log (DESIGN.md §8).

Sequence numbers come from `UPDATE run SET last_seq = last_seq + 1 RETURNING`, which
serializes event writers of one run on its row for the rest of their transaction.
That is why map items write no events (DESIGN.md §4): batch-level facts only.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import connection
from psycopg.types.json import Jsonb

from .models import Event

# Event types. Payloads are small JSON objects; Event.schema_version says how to read them.
RUN_SUBMITTED = "run_submitted"
RUN_STARTED = "run_started"
RUN_SUCCEEDED = "run_succeeded"
RUN_FAILED = "run_failed"
RUN_CANCELLED = "run_cancelled"
RUN_REOPENED = "run_reopened"  # an operator retried failed steps of a failed run
RUN_NEEDS_RECONCILIATION = "run_needs_reconciliation"
STEP_QUEUED = "step_queued"
STEP_STARTED = "step_started"
STEP_SUCCEEDED = "step_succeeded"
STEP_RETRYING = "step_retrying"
STEP_FAILED = "step_failed"
STEP_UNRESOLVED = "step_unresolved"
STEP_REFUSED = "step_refused"
ATTEMPT_CRASHED = "attempt_crashed"
PLAN_EXPANDED = "plan_expanded"
BATCH_FINISHED = "batch_finished"
CLAIM_TAKEN = "claim_taken"
CLAIM_SUCCEEDED = "claim_succeeded"
CLAIM_FAILED = "claim_failed"
CLAIM_UNRESOLVED = "claim_unresolved"
CLAIM_ABANDONED = "claim_abandoned"  # an idempotent step gave up, outcome unknown
CLAIM_RESOLVED = "claim_resolved"
CLAIM_EVIDENCE = "claim_evidence"  # e.g. the late result of a fenced-off guarded attempt
# A fenced-off attempt's result or error for a claim that was already resolved: the
# resolution stands (it is final), the reconciliation pages flag the disagreement.
LATE_RESULT_AFTER_RESOLUTION = "late_result_after_resolution"
PROBE_REQUESTED = "probe_requested"
PROBE_INCONCLUSIVE = "probe_inconclusive"
RUN_RESUMED = "run_resumed"
# Authoring (issue 13): waits, signals, conditions, compensation.
RUN_WAITING = "run_waiting"  # a step waits for a signal or a time; no worker is held
RUN_WOKEN = "run_woken"  # its last waiting step was woken: running again
STEP_WAITING = "step_waiting"
STEP_SKIPPED = "step_skipped"  # its condition was false; dependents proceed
SIGNAL_RECEIVED = "signal_received"  # with its actor, kept until a wait consumes it
SIGNAL_CONSUMED = "signal_consumed"
RUN_COMPENSATING = "run_compensating"
COMPENSATION_PLANNED = "compensation_planned"  # a compensation step entered the plan


def append_event(
    run_id: uuid.UUID | str,
    type: str,
    *,
    step_id: int | None = None,
    attempt_number: int | None = None,
    **payload: Any,
) -> int:
    """Append one event to the run's log and return its seq. Call inside the
    transaction that makes the change the event records. One statement: the seq is
    allocated and the event inserted together."""
    params: list[Any] = [
        run_id,
        run_id,
        type,
        step_id,
        attempt_number,
        Event.SCHEMA_VERSION,
        Jsonb(payload),
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH seq AS (
                UPDATE runs_run SET last_seq = last_seq + 1 WHERE id = %s RETURNING last_seq
            )
            INSERT INTO runs_event
                (run_id, seq, type, step_id, attempt_number, schema_version, payload, created_at)
            SELECT %s, seq.last_seq, %s, %s, %s, %s, %s, statement_timestamp() FROM seq
            RETURNING seq
            """,
            params,
        )
        row = cursor.fetchone()
    if row is None:
        raise LookupError(f"run {run_id} does not exist")
    return int(row[0])
