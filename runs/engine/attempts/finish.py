"""Finishing an attempt: its success (and the successor this worker runs next), its
failure (a retry, the step's end, or an unresolved claim), its deferral.

Every finish is fenced (docs/architecture.md, "Fences"): its first statement moves the
attempt out of `running` only if it is still running and its lease, on the database's
clock, has not expired. A finish that loses the fence raises AttemptFenced and its
transaction, effect included, rolls back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now
from psycopg.types.json import Jsonb

from runs import sql
from runs.engine.core import faults
from runs.engine.core.clock import db_now_plus
from runs.engine.core.jsonvalues import ensure_json
from runs.engine.core.keys import step_claim_key
from runs.engine.core.locks import lock_run
from runs.engine.core.publish import publish_on_commit
from runs.engine.state import ready
from runs.engine.state.ready import dependents_of, dependents_params, step_succeeded
from runs.engine.state.run import fail_step, statuses_going_on
from runs.engine.state.unresolved import mark_unresolved
from runs.errors import AttemptFenced
from runs.models import Claim, Step
from runs.record import events
from runs.sql import prepared
from runs.states import AttemptStatus, ClaimStatus, EffectKind, StepStatus

from .claims import insert_claim
from .lease import fence
from .start import SQL as START_SQL
from .start import (
    Started,
    StartParams,
    chained_successor,
    layout,
    start_successor,
    started_from_row,
)

SQL = sql.load(__file__, includes={**ready.SQL, **START_SQL})


def _leave_running(started: Started, **fields: Any) -> None:
    """The step's own transition out of `running`, conditional on the attempt."""
    n = Step.objects.filter(
        pk=started.step.id, status=StepStatus.RUNNING, current_attempt_id=started.attempt.id
    ).update(current_attempt=None, **fields)
    if n != 1:
        raise AttemptFenced(f"step {started.step.key} is no longer owned by its attempt")


@dataclass(frozen=True, slots=True)
class Successor:
    """The one step a success made ready, for this worker to run next instead of a
    message (entry/execute.py): `started` when its start committed with the finish
    (start.start_successor); else `step_id`, to start after the commit, through the same
    conditional UPDATE as a message's."""

    started: Started | None = None
    step_id: int | None = None


def finish_with_result(
    started: Started, result: Any, *, may_continue: bool = False
) -> Successor | None:
    """Record a successful attempt whose effect already happened (pure, idempotent,
    guarded): its result, its claim, what follows. `may_continue`: the caller will run
    a single ready successor itself (returned), else it is published."""
    return _finish(started, lambda: (started.claim, ensure_json(result)), may_continue=may_continue)


def finish_with_effect(
    started: Started, effect: Callable[[], Any], *, may_continue: bool = False
) -> Successor | None:
    """Record a successful transactional attempt: `effect` runs inside this transaction
    together with its claim, so the effect commits exactly when the completion does."""

    def run_effect() -> tuple[Claim | None, Any]:
        # The effect runs BEFORE the fence: a paused worker holding this transaction
        # open does not lock its attempt row, so the sweeper can still declare it
        # crashed; the claim's unique key makes a successor wait for us, and our
        # fence then fails and rolls the effect back (docs/architecture.md, "Fences").
        claim = _insert_transactional_claim(started)
        faults.hit("after_claim", started.step.name)
        result = ensure_json(effect())
        faults.hit("after_effect", started.step.name)
        return claim, result

    return _finish(started, run_effect, may_continue=may_continue)


def finish_batch(
    started: Started, counts: dict[str, int], *, may_continue: bool = False
) -> Successor | None:
    """Record a map batch whose items are done: its counts are its result and its
    `batch_finished` event."""
    return _finish(
        started, lambda: (None, ensure_json(counts)), batch_counts=counts, may_continue=may_continue
    )


def _finish(
    started: Started,
    produce: Callable[[], tuple[Claim | None, Any]],
    *,
    may_continue: bool,
    batch_counts: dict[str, int] | None = None,
) -> Successor | None:
    """The three modes' shared transaction: `produce` gives the claim and the result
    (running a transactional effect on the way), then the fence and the success."""
    step, run, attempt = started.step, started.run, started.attempt
    name = step.name
    with transaction.atomic(), events.buffered():
        claim, result = produce()
        if _may_fail_the_run(started):
            _hold_attempt_and_run(started)
        chain = chained_successor(started) if may_continue else None
        found, chained = _fence_and_succeed(started, result, claim, chain=chain)
        if claim is not None:
            events.append_event(
                run.id,
                events.ClaimSucceeded(key=claim.key),
                step_id=step.id,
                attempt_number=attempt.number,
            )
        if batch_counts is not None:
            events.append_event(
                run.id,
                events.BatchFinished(step=step.key, **batch_counts),
                step_id=step.id,
                attempt_number=attempt.number,
            )
        events.append_event(
            run.id,
            events.StepSucceeded(step=step.key),
            step_id=step.id,
            attempt_number=attempt.number,
        )
        ready = step_succeeded(run_id=run.id, step=step, workflow=started.workflow, found=found)
        continuing = may_continue and len(ready) == 1
        # What the statement started is what became ready, and runs here next.
        assert chained is None or (continuing and ready == [chained.step_id])
        if continuing:
            # This worker runs it next (entry/execute.py), no message: started by the
            # finish's own statement or here, committed with this finish, or else after
            # the commit.
            following = (
                chained.started() if chained is not None else start_successor(started, ready[0])
            )
        else:
            # For a map step the fault points apply per item (items.py), not per batch.
            publish_on_commit(ready, fault_step=None if step.parent_id else name)
    # Only once the commit succeeded: a start that rolled back with a failed finish must
    # not be run.
    if not continuing:
        return None
    if following is not None:
        return Successor(started=following)
    return Successor(step_id=ready[0])


def _may_fail_the_run(started: Started) -> bool:
    """Whether what follows this success may take the run FOR UPDATE (lock_run) after
    the finish's statement has taken it FOR NO KEY UPDATE (its counters): a dependent it
    makes ready that is a map step (a list it cannot map fails the step and the run:
    expand) or has a condition (one that raises does the same: conditions), both
    through fail_run; a batch's, through its map step's dependents. Computed once per
    process per step name (ready.dependents_of). A compensation's success never locks
    the run so (compensation_succeeded); a step that names one plans it under lock_run
    only where its statement found the run stopped, when no start can hold the row with
    events still to write (docs/architecture.md, "Locks")."""
    if started.step.compensates:
        return False
    _, careful = dependents_of(started.workflow, started.step.name)
    return bool(careful)


def _hold_attempt_and_run(started: Started) -> None:
    """The run at the strength the success may need (FOR UPDATE), before the finish's
    statement takes it weaker: a start of another step holds it FOR KEY SHARE until it
    writes its events (FOR NO KEY UPDATE), and a finish that took the counter first
    would wait for that start while the start's events waited for it. The attempt's
    row first, at the strength of its fence's UPDATE (docs/architecture.md, "Locks":
    the attempt, then the run), so that the sweeper, which takes an attempt and then
    its run, skips this one instead of waiting for the run behind it."""
    with prepared.cursor() as cursor:
        cursor.execute(SQL["hold_attempt"], {"attempt": started.attempt.id})
    lock_run(started.run.id)


@dataclass(frozen=True, slots=True)
class _Chained:
    """The dependent succeed_and_start moved to running: its row, for the Started the
    caller builds once step_succeeded() has written what comes before its events."""

    step_id: int
    layout: Any
    row: Any
    params: StartParams

    def started(self) -> Started:
        results = self.row[self.layout.extras]
        return started_from_row(
            self.layout, self.row, self.params, results=results, parent_revision=None
        )


def _fence_and_succeed(
    started: Started, result: Any, claim: Claim | None, *, chain: str | None = None
) -> tuple[list[tuple[Any, ...]] | None, _Chained | None]:
    """The fence, the claim's outcome and the step's own transition, in one statement:
    the attempt leaves `running` only while it still holds its lease (database clock),
    the claim succeeds only if it is still this attempt's and in flight, the step only
    if this attempt still owns it. Anything less raises AttemptFenced, and the whole
    transaction (a transactional effect included) rolls back.

    For a step of the plan (not a batch, not a compensation) the same statement goes on
    with what step_succeeded() would do next: the run's remaining-steps counter and the
    dependents' counters (ready.sql), only if the step's own transition happened;
    its rows are returned for step_succeeded(found=...). None otherwise. `chain`: the
    one dependent this worker runs next (start.chained_successor), which the statement
    then also starts when this success makes it ready (succeed_and_start): returned
    second, its row reported to step_succeeded() as queued (its step_queued event comes
    before its step_started)."""
    params: dict[str, Any] = {
        "attempt": started.attempt.id,
        "attempt_succeeded": AttemptStatus.SUCCEEDED,
        "attempt_running": AttemptStatus.RUNNING,
        "claim": claim.id if claim is not None else None,
        "claim_succeeded": ClaimStatus.SUCCEEDED,
        "in_flight": ClaimStatus.IN_FLIGHT,
        "result": Jsonb(result),
        "succeeded": StepStatus.SUCCEEDED,
        "running": StepStatus.RUNNING,
        "step": started.step.id,
    }
    step = started.step
    with_dependents = step.parent_id is None and not step.compensates
    if with_dependents:
        direct, careful = dependents_of(started.workflow, step.name)
        params.update(dependents_params(started.run.id, direct, careful))
    if with_dependents and chain is not None:
        return _succeed_and_start(started, params, chain, claim)
    with prepared.cursor() as cursor:
        cursor.execute(SQL["succeed_and_dependents" if with_dependents else "succeed"], params)
        rows = cursor.fetchall()
    if with_dependents:  # always one row at least: (done, claimed, dependents...)
        done, claimed = rows[0][0], rows[0][1]
    else:  # a row only if the step's transition happened: (claimed,)
        done, claimed = len(rows), rows[0][0] if rows else 0
    _check_fence(started, claim, done, claimed)
    if not with_dependents:
        return None, None
    # As ready.sql's dependents statement returns them; none when the run compensates (r is empty).
    return [row[2:] for row in rows if row[2] is not None], None


def _succeed_and_start(
    started: Started, params: dict[str, Any], chain: str, claim: Claim | None
) -> tuple[list[tuple[Any, ...]], _Chained | None]:
    start = StartParams.now(started.attempt.worker)
    with prepared.cursor() as cursor:
        cursor.execute(
            SQL["succeed_and_start"],
            {**params, **start.sql(), "next": chain, "name": started.step.name},
        )
        row = cursor.fetchone()
        assert row is not None  # one row always: FROM (SELECT 1) LEFT JOIN ...
        found = layout(cursor, len(row))
    extras = row[found.extras + 1 :]  # after the results: done, claimed, started, ...
    done, claimed, began = extras[0], extras[1], extras[2]
    _check_fence(started, claim, done, claimed)
    steps_remaining, run_status, step_id, key, name, pending, status = extras[3:]
    if steps_remaining is None:  # the counter's UPDATE matched no row: the run compensates
        return [], None
    if step_id is None:  # the run ends with this step, or stopped
        return [(steps_remaining, run_status, None, None, None, None, None)], None
    if not began:
        return [(steps_remaining, run_status, step_id, key, name, pending, status)], None
    queued = (steps_remaining, run_status, step_id, key, name, pending, StepStatus.QUEUED)
    return [queued], _Chained(step_id=step_id, layout=found, row=row, params=start)


def _check_fence(started: Started, claim: Claim | None, done: int, claimed: int) -> None:
    if not done:
        raise AttemptFenced(
            f"attempt {started.attempt.id} no longer owns step {started.step.key} "
            "(lease expired, or recovered by another worker)"
        )
    if claim is not None and claimed != 1:
        raise AttemptFenced(f"claim {claim.key} is no longer this attempt's")


def _insert_transactional_claim(started: Started) -> Claim:
    key = step_claim_key(started.run, started.step, started.stepdef)
    claim_id = insert_claim(
        key=key,
        run_id=started.run.id,
        step_id=started.step.id,
        item_key=None,
        kind=started.step.kind,
        attempt_id=started.attempt.id,
    )
    if claim_id is None:
        # Only possible if the step already committed its effect under another
        # attempt, which the fence excludes; refuse rather than apply twice.
        raise AttemptFenced(f"claim {key} already exists")
    return Claim(id=claim_id, key=key)


def fail_attempt(
    started: Started, *, error: str, uncertain: bool, timed_out: float | None = None
) -> str:
    """Record a failed attempt and decide what follows, by effect kind
    (docs/architecture.md, "Effect kinds"): an uncertain guarded effect becomes
    unresolved; otherwise retry with backoff while attempts remain, then fail the step
    and the run. Returns the outcome word.

    `uncertain`: the effect may have happened (anything but NotApplied). When a step
    gives up, its in-flight claims close as `failed` only if the effect certainly did
    not happen; an idempotent step's become `abandoned` (outcome unknown). `timed_out`:
    the step's timeout, when that is what stopped it (an attempt_timed_out event first).
    """
    step, run, attempt = started.step, started.run, started.attempt
    with transaction.atomic():
        if started.step.kind == EffectKind.GUARDED and uncertain:
            fence(attempt.id, AttemptStatus.UNRESOLVED, error)
            _record_timeout(started, timed_out)
            _leave_running(started, status=StepStatus.UNRESOLVED, error=error)
            mark_unresolved(
                run_id=run.id,
                step=step,
                attempt_number=attempt.number,
                reason=error,
                probe_after=Now(),
            )
            return "unresolved"
        fence(attempt.id, AttemptStatus.FAILED, error)
        _record_timeout(started, timed_out)
        # Decided on the run as it is now, under its lock (core/locks.py): an operator's retry
        # that reopened it meanwhile is seen, and none can commit between this decision
        # and its writes.
        current = lock_run(run.id)
        assert current is not None  # this step's row refers to it
        going_on = current.status in statuses_going_on(step)
        if step.has_attempts_left and going_on:
            _retry_later(started, error=error, delay=started.stepdef.retry.delay(step.attempts))
            return "retrying"
        if not fail_step(
            run.id,
            step,
            error=error,
            was=StepStatus.RUNNING,
            owned_by=attempt,
            attempt_number=attempt.number,
            maybe_applied=uncertain,
            current_attempt=None,
        ):
            raise AttemptFenced(f"step {step.key} is no longer owned by its attempt")
        return "failed"


def _record_timeout(started: Started, seconds: float | None) -> None:
    if seconds is not None:
        events.append_event(
            started.run.id,
            events.AttemptTimedOut(step=started.step.key, seconds=seconds),
            step_id=started.step.id,
            attempt_number=started.attempt.number,
        )


def defer_attempt(started: Started, *, reason: str) -> str:
    """The attempt gave way to a claim key held by another session's open transaction
    (claims.ClaimBusy): its transaction rolled back, nothing was applied. Retry later
    without counting it against max_attempts, so a partitioned worker cannot use up a
    step's attempts while PostgreSQL has not yet noticed that it is gone."""
    with transaction.atomic():
        fence(started.attempt.id, AttemptStatus.DEFERRED, reason)
        _retry_later(
            started,
            error=reason,
            delay=float(settings.RUNS_CLAIM_BUSY_RETRY_SECONDS),
            deferred=True,
        )
    return "deferred"


def _retry_later(started: Started, *, error: str, delay: float, deferred: bool = False) -> None:
    """running → retrying, due `delay` seconds from now on the database's clock, with
    its event; the message goes out after commit with the same countdown. A deferred
    attempt is not counted against max_attempts."""
    step = started.step
    extra: dict[str, Any] = {"deferred_attempts": F("deferred_attempts") + 1} if deferred else {}
    _leave_running(
        started,
        status=StepStatus.RETRYING,
        error=error,
        next_attempt_at=db_now_plus(delay),
        **extra,
    )
    events.append_event(
        started.run.id,
        events.StepRetrying(step=step.key, error=error, delay=round(delay, 3), deferred=deferred),
        step_id=step.id,
        attempt_number=started.attempt.number,
    )
    publish_on_commit([step.id], countdown=delay)
