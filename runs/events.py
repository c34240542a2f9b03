"""append_event(): the only writer of the event log (docs/architecture.md#history-and-restore).

Sequence numbers come from `UPDATE run SET last_seq = last_seq + n RETURNING`, which
serializes event writers of one run on its row for the rest of their transaction.
That is why map items write no events (docs/architecture.md#map-steps): batch-level facts only,
and why
the engine's start and finish buffer their events (`buffered()`) and write them in one
statement at the end of their transaction: the run's row is then locked only from that
statement to the commit, not from the first event on (which serialised the parallel
steps and batches of one run).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg.types.json import Jsonb

from . import prepared, sql
from .models import Event

SQL = sql.load(__file__)

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
# A probe's definite answer (applied, not applied) for a claim already resolved the
# other way: the resolution stands (it is final), the reconciliation pages flag it.
PROBE_CONTRADICTS_RESOLUTION = "probe_contradicts_resolution"
PROBE_REQUESTED = "probe_requested"
PROBE_INCONCLUSIVE = "probe_inconclusive"
# The probe used up its tries without an answer (each time its worker died or stalled
# past its probe lease): the claim stays unresolved, for the operator.
PROBE_GAVE_UP = "probe_gave_up"
RUN_RESUMED = "run_resumed"
# Authoring: waits, signals, conditions, compensation.
RUN_WAITING = "run_waiting"  # a step waits for a signal or a time; no worker is held
RUN_WOKEN = "run_woken"  # its last waiting step was woken: running again
STEP_WAITING = "step_waiting"
STEP_SKIPPED = "step_skipped"  # its condition was false; dependents proceed
SIGNAL_RECEIVED = "signal_received"  # with its actor, kept until a wait consumes it
SIGNAL_CONSUMED = "signal_consumed"
RUN_COMPENSATING = "run_compensating"
# A run stopped for good: its plan's steps still queued went back to pending, never to
# start (state/stopped.py); `steps` names them.
STEPS_WITHDRAWN = "steps_withdrawn"
COMPENSATION_PLANNED = "compensation_planned"  # a compensation step entered the plan


class _Local(threading.local):
    pending: list[tuple[uuid.UUID | str, str, int | None, int | None, dict[str, Any]]] | None = None


_local = _Local()


@contextmanager
def buffered() -> Iterator[None]:
    """Events appended inside are written when the block ends without an exception, in
    one statement per run, seq allocated in order. Use it INSIDE the transaction that
    makes the changes (`with transaction.atomic(), events.buffered():`), around code
    that does not roll back to a savepoint and carry on (the events of the rolled-back
    part would still be written). Nested blocks write with the outermost."""
    if _local.pending is not None:
        yield
        return
    pending: list[tuple[uuid.UUID | str, str, int | None, int | None, dict[str, Any]]] = []
    _local.pending = pending
    try:
        yield
    finally:
        _local.pending = None
    _write(pending)


def buffer_mark() -> int:
    """How many events the open buffer holds: rewind_buffer(mark) drops those appended
    after it, for the part of a transaction that rolled back to a savepoint."""
    assert _local.pending is not None, "buffer_mark() outside buffered()"
    return len(_local.pending)


def rewind_buffer(mark: int) -> None:
    assert _local.pending is not None, "rewind_buffer() outside buffered()"
    del _local.pending[mark:]


def _write(
    pending: list[tuple[uuid.UUID | str, str, int | None, int | None, dict[str, Any]]],
) -> None:
    runs: dict[str, list[tuple[str, int | None, int | None, dict[str, Any]]]] = {}
    for run_id, type, step_id, attempt_number, payload in pending:
        runs.setdefault(str(run_id), []).append((type, step_id, attempt_number, payload))
    for run_id, entries in runs.items():
        if len(entries) == 1:
            type, step_id, attempt_number, payload = entries[0]
            _append_now(run_id, type, step_id, attempt_number, payload)
            continue
        with prepared.cursor() as cursor:
            cursor.execute(
                SQL["append_many"],
                {
                    "n": len(entries),
                    "run": run_id,
                    "version": Event.SCHEMA_VERSION,
                    "types": [e[0] for e in entries],
                    "steps": [e[1] for e in entries],
                    "attempts": [e[2] for e in entries],
                    "payloads": [Jsonb(e[3]) for e in entries],
                },
            )
            if cursor.rowcount != len(entries):
                raise LookupError(f"run {run_id} does not exist")


def append_event(
    run_id: uuid.UUID | str,
    type: str,
    *,
    step_id: int | None = None,
    attempt_number: int | None = None,
    **payload: Any,
) -> None:
    """Append one event to the run's log. Call inside the transaction that makes the
    change the event records. One statement: the seq is allocated and the event
    inserted together; inside `buffered()`, at the end of the block with the others."""
    if _local.pending is not None:
        _local.pending.append((run_id, type, step_id, attempt_number, payload))
        return
    _append_now(run_id, type, step_id, attempt_number, payload)


def _append_now(
    run_id: uuid.UUID | str,
    type: str,
    step_id: int | None,
    attempt_number: int | None,
    payload: dict[str, Any],
) -> int:
    params = {
        "run": run_id,
        "type": type,
        "step": step_id,
        "attempt": attempt_number,
        "version": Event.SCHEMA_VERSION,
        "payload": Jsonb(payload),
    }
    with prepared.cursor() as cursor:
        cursor.execute(SQL["append_one"], params)
        row = cursor.fetchone()
    if row is None:
        raise LookupError(f"run {run_id} does not exist")
    return int(row[0])
