"""Finishing an attempt: success, failure, and what follows from them (successors,
map expansion, run completion).

Every finish is fenced (DESIGN.md §7): its first statement moves the attempt out of
`running` only if it is still running and its lease, on the database's clock, has
not expired. A finish that loses the fence raises AttemptFenced and its transaction,
effect included, rolls back.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Expression, F
from django.db.models.functions import Now
from psycopg.types.json import Jsonb

from runs import events, prepared
from runs.models import Attempt, Claim, Run, Step
from runs.states import RUN_ACTIVE, AttemptStatus, ClaimStatus, EffectKind, RunStatus, StepStatus
from runs.workflows.definition import Workflow

from . import compensate, faults
from .claims import insert_claim
from .compensate import begin_compensation, compensation_succeeded
from .dispatch import publish_on_commit
from .errors import AttemptFenced
from .locks import lock_run
from .start import Started, sql_array, start_successor, step_claim_key
from .timing import db_now_plus

log = logging.getLogger(__name__)


def fence(attempt_id: int, status: AttemptStatus, error: str = "") -> None:
    """Move a live attempt to its final status, or raise AttemptFenced."""
    n = Attempt.objects.filter(
        pk=attempt_id, status=AttemptStatus.RUNNING, lease_expires_at__gt=Now()
    ).update(status=status, finished_at=Now(), error=error)
    if n != 1:
        raise AttemptFenced(f"attempt {attempt_id} no longer owns its step")


def renew_lease(attempt_id: int, seconds: float, *, entering_effect: bool = False) -> None:
    """Heartbeat: extend a live lease, or raise AttemptFenced if it was lost.
    `entering_effect`: the guarded step's function is called next; the same conditional
    UPDATE records it (recover.py retries a crashed attempt that never got here)."""
    fields: dict[str, Any] = {"lease_expires_at": db_now_plus(seconds)}
    if entering_effect:
        fields["effect_entered_at"] = Now()
    n = Attempt.objects.filter(
        pk=attempt_id, status=AttemptStatus.RUNNING, lease_expires_at__gt=Now()
    ).update(**fields)
    if n != 1:
        raise AttemptFenced(f"attempt {attempt_id} lost its lease")


def _leave_running(started: Started, **fields: Any) -> None:
    """The step's own transition out of `running`, conditional on the attempt."""
    n = Step.objects.filter(
        pk=started.step.id, status=StepStatus.RUNNING, current_attempt_id=started.attempt.id
    ).update(current_attempt=None, **fields)
    if n != 1:
        raise AttemptFenced(f"step {started.step.key} is no longer owned by its attempt")


def ensure_json(value: Any, what: str = "step result") -> Any:
    """Results and evidence are stored as JSON: refuse what cannot round-trip, with a
    clear error."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serializable: {exc}") from exc


def finish_attempt(
    started: Started,
    *,
    result: Any = None,
    effect: Callable[[], Any] | None = None,
    batch_counts: dict[str, int] | None = None,
) -> None:
    """Record a successful attempt. For a transactional step, `effect` runs inside this
    transaction together with its claim, so the effect commits exactly when the
    completion does."""
    step, run, attempt = started.step, started.run, started.attempt
    name = step.name
    with transaction.atomic(), events.buffered():
        claim: Claim | None = started.claim
        if effect is not None:
            # The effect runs BEFORE the fence: a paused worker holding this transaction
            # open does not lock its attempt row, so the sweeper can still declare it
            # crashed; the claim's unique key makes a successor wait for us, and our
            # fence then fails and rolls the effect back (DESIGN.md §7).
            claim = _insert_transactional_claim(started)
            faults.hit("after_claim", name)
            result = ensure_json(effect())
            faults.hit("after_effect", name)
        else:
            result = ensure_json(result)
        found = _fence_and_succeed(started, result, claim)
        if claim is not None:
            events.append_event(
                run.id,
                events.CLAIM_SUCCEEDED,
                step_id=step.id,
                attempt_number=attempt.number,
                key=claim.key,
            )
        if batch_counts is not None:
            events.append_event(
                run.id,
                events.BATCH_FINISHED,
                step_id=step.id,
                attempt_number=attempt.number,
                step=step.key,
                **batch_counts,
            )
        events.append_event(
            run.id,
            events.STEP_SUCCEEDED,
            step_id=step.id,
            attempt_number=attempt.number,
            step=step.key,
        )
        ready = step_succeeded(run_id=run.id, step=step, workflow=started.workflow, found=found)
        continuing = started.may_continue and len(ready) == 1
        if continuing:
            # This worker runs it next (execute.py), no message: started here, committed
            # with this finish, or else after the commit.
            following = start_successor(started, ready[0])
        else:
            # For a map step the fault points apply per item (mapping.py), not per batch.
            publish_on_commit(ready, fault_step=None if step.parent_id else name)
    # Only once the commit succeeded: a start that rolled back with a failed finish must
    # not be run.
    if continuing:
        started.continued = following
        started.continue_with = ready[0] if following is None else None


_FENCE_CTES = """
    WITH fenced AS (
        UPDATE runs_attempt
        SET status = %(attempt_succeeded)s, finished_at = statement_timestamp(), error = ''
        WHERE id = %(attempt)s AND status = %(attempt_running)s
          AND lease_expires_at > statement_timestamp()
        RETURNING id
    ), claim AS (
        UPDATE runs_claim SET status = %(claim_succeeded)s, result = %(result)s,
                              completed_at = statement_timestamp()
        WHERE id = %(claim)s AND status = %(in_flight)s AND attempt_id = %(attempt)s
          AND EXISTS (SELECT 1 FROM fenced)
        RETURNING id
    )"""

_STEP_SUCCEEDS = """
    UPDATE runs_step SET status = %(succeeded)s, result = %(result)s,
                         finished_at = statement_timestamp(), current_attempt_id = NULL
    WHERE id = %(step)s AND status = %(running)s
      AND current_attempt_id = (SELECT id FROM fenced)"""

_SUCCEED_SQL = f"""{_FENCE_CTES}
    {_STEP_SUCCEEDS}
    RETURNING (SELECT count(*) FROM claim)
"""


def _fence_and_succeed(
    started: Started, result: Any, claim: Claim | None
) -> list[tuple[Any, ...]] | None:
    """The fence, the claim's outcome and the step's own transition, in one statement:
    the attempt leaves `running` only while it still holds its lease (database clock),
    the claim succeeds only if it is still this attempt's and in flight, the step only
    if this attempt still owns it. Anything less raises AttemptFenced, and the whole
    transaction (a transactional effect included) rolls back.

    For a step of the plan (not a batch, not a compensation) the same statement goes on
    with what step_succeeded() would do next: the run's remaining-steps counter and the
    dependents' counters (_DEPENDENTS_SQL), only if the step's own transition happened;
    its rows are returned for step_succeeded(found=...). None otherwise."""
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
        direct, careful = _dependents(started.workflow, step.name)
        params.update(_dependents_params(started.run.id, direct, careful))
    with prepared.cursor() as cursor:
        cursor.execute(_SUCCEED_AND_DEPENDENTS_SQL if with_dependents else _SUCCEED_SQL, params)
        rows = cursor.fetchall()
    if with_dependents:  # always one row at least: (done, claimed, dependents...)
        done, claimed = rows[0][0], rows[0][1]
    else:  # a row only if the step's transition happened: (claimed,)
        done, claimed = len(rows), rows[0][0] if rows else 0
    if not done:
        raise AttemptFenced(
            f"attempt {started.attempt.id} no longer owns step {started.step.key} "
            "(lease expired, or recovered by another worker)"
        )
    if claim is not None and claimed != 1:
        raise AttemptFenced(f"claim {claim.key} is no longer this attempt's")
    if not with_dependents:
        return None
    # As _DEPENDENTS_SQL returns them; none when the run compensates (r is empty).
    return [row[2:] for row in rows if row[2] is not None]


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


def fail_attempt(started: Started, *, error: str, uncertain: bool) -> str:
    """Record a failed attempt and decide what follows, by effect kind (DESIGN.md §3):
    an uncertain guarded effect becomes unresolved; otherwise retry with backoff while
    attempts remain, then fail the step and the run. Returns the outcome word.

    `uncertain`: the effect may have happened (anything but NotApplied). When a step
    gives up, its in-flight claims close as `failed` only if the effect certainly did
    not happen; an idempotent step's become `abandoned` (outcome unknown)."""
    step, run, attempt = started.step, started.run, started.attempt
    with transaction.atomic():
        if started.step.kind == EffectKind.GUARDED and uncertain:
            fence(attempt.id, AttemptStatus.UNRESOLVED, error)
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
        # Decided on the run as it is now, under its lock (locks.py): an operator's retry
        # that reopened it meanwhile is seen, and none can commit between this decision
        # and its writes.
        current = lock_run(run.id)
        assert current is not None  # this step's row refers to it
        going_on = current.status in statuses_going_on(step)
        if step.has_attempts_left and going_on:
            _retry_later(started, error=error, delay=started.stepdef.retry.delay(step.attempts))
            return "retrying"
        _leave_running(started, status=StepStatus.FAILED, error=error, finished_at=Now())
        close_claims_on_give_up(run_id=run.id, step=step, error=error, maybe_applied=uncertain)
        events.append_event(
            run.id,
            events.STEP_FAILED,
            step_id=step.id,
            attempt_number=attempt.number,
            step=step.key,
            error=error,
        )
        fail_run(run.id, f"step {step.key} failed: {error}", compensation=bool(step.compensates))
        return "failed"


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
        events.STEP_RETRYING,
        step_id=step.id,
        attempt_number=started.attempt.number,
        step=step.key,
        error=error,
        delay=round(delay, 3),
        **({"deferred": True} if deferred else {}),
    )
    publish_on_commit([step.id], countdown=delay)


def _close_in_flight_claims(
    *,
    run_id: uuid.UUID,
    step: Step,
    status: ClaimStatus,
    event: str,
    error: str,
    attempt_number: int | None = None,
    **payload: Any,
) -> None:
    """Move the step's in-flight claims to `status` (failed: done; unresolved: waiting
    for a resolution), with one event each."""
    fields: dict[str, Any] = {"status": status, "error": error}
    if status == ClaimStatus.UNRESOLVED:
        fields["unresolved_at"] = Now()
    else:
        fields["completed_at"] = Now()
    claims = list(
        Claim.objects.filter(step=step, status=ClaimStatus.IN_FLIGHT).values_list("id", "key")
    )
    Claim.objects.filter(pk__in=[pk for pk, _ in claims], status=ClaimStatus.IN_FLIGHT).update(
        **fields
    )
    for _, key in claims:
        events.append_event(
            run_id, event, step_id=step.id, attempt_number=attempt_number, key=key, **payload
        )


def close_claims_on_give_up(
    *, run_id: uuid.UUID, step: Step, error: str, maybe_applied: bool
) -> None:
    """A step failed for good: close its in-flight claims. `failed` means the effect
    did not happen; an idempotent effect that may have happened is `abandoned` (its
    outcome is unknown, and a retry with the same key is safe)."""
    if maybe_applied and step.kind == EffectKind.IDEMPOTENT:
        status, event = ClaimStatus.ABANDONED, events.CLAIM_ABANDONED
    else:
        status, event = ClaimStatus.FAILED, events.CLAIM_FAILED
    _close_in_flight_claims(run_id=run_id, step=step, status=status, event=event, error=error)


def mark_unresolved(
    *,
    run_id: uuid.UUID,
    step: Step,
    attempt_number: int,
    reason: str,
    probe_after: Expression | Any,
) -> None:
    """The step's in-flight claim becomes unresolved and the run waits for a human (or
    its probe, which runs no earlier than `probe_after`, on the database's clock)."""
    _close_in_flight_claims(
        run_id=run_id,
        step=step,
        status=ClaimStatus.UNRESOLVED,
        event=events.CLAIM_UNRESOLVED,
        error=reason,
        attempt_number=attempt_number,
        reason=reason,
    )
    events.append_event(
        run_id,
        events.STEP_UNRESOLVED,
        step_id=step.id,
        attempt_number=attempt_number,
        step=step.key,
        reason=reason,
    )
    if Run.objects.filter(pk=run_id, status__in=[RunStatus.RUNNING, RunStatus.WAITING]).update(
        status=RunStatus.NEEDS_RECONCILIATION, updated_at=Now()
    ):
        events.append_event(run_id, events.RUN_NEEDS_RECONCILIATION, step=step.key)
    from .probe import request_probes

    request_probes(run_id=run_id, step=step, probe_after=probe_after)


def statuses_going_on(step: Step) -> tuple[str, ...]:
    """The run statuses in which this step may still be retried."""
    return (RunStatus.COMPENSATING,) if step.compensates else RUN_ACTIVE


def fail_run(run_id: uuid.UUID, error: str, *, compensation: bool = False) -> None:
    """A step failed for good: the run fails, or compensates first if steps with a
    compensation have succeeded (runs/engine/compensate.py). A compensation that fails
    for good (`compensation=True`) ends its compensating run as failed, naming it.
    Decided under the run row's lock (locks.py); a run no longer active is left as it
    is."""
    run = lock_run(run_id)
    if run is None:
        return
    if compensation:
        if run.status == RunStatus.COMPENSATING:
            Run.objects.filter(pk=run_id).update(
                status=RunStatus.FAILED, error=error, finished_at=Now(), updated_at=Now()
            )
            events.append_event(run_id, events.RUN_FAILED, error=error)
        return
    if run.status not in RUN_ACTIVE:
        return
    if begin_compensation(run, ends_as=RunStatus.FAILED, error=error):
        return
    Run.objects.filter(pk=run_id).update(
        status=RunStatus.FAILED, error=error, finished_at=Now(), updated_at=Now()
    )
    events.append_event(run_id, events.RUN_FAILED, error=error)


def step_succeeded(
    *,
    run_id: uuid.UUID,
    step: Step,
    workflow: Workflow,
    found: list[tuple[Any, ...]] | None = None,
) -> list[int]:
    """Propagate a step's success; return the ids of steps that became queued.

    A batch decrements its map parent; a top-level step decrements the run's counter
    and its dependents' pending-dependency counters (an indexed lookup by name, never a
    scan of the plan). `found`: the rows of that UPDATE when the finish's own statement
    already ran it (_fence_and_succeed)."""
    if step.parent_id is not None:
        remaining = _batch_done(run_id, step.parent_id)
        if remaining != 0:
            return []
        parent = Step.objects.get(pk=step.parent_id)
        n = Step.objects.filter(pk=parent.id, status=StepStatus.RUNNING).update(
            status=StepStatus.SUCCEEDED,
            finished_at=Now(),
            result={"items": _count_items(parent), "batches": parent.batches.count()},
        )
        if n != 1:
            raise RuntimeError(f"map step {parent.key} was not running")
        events.append_event(run_id, events.STEP_SUCCEEDED, step_id=parent.id, step=parent.key)
        return step_succeeded(run_id=run_id, step=parent, workflow=workflow)

    if step.compensates:
        return compensation_succeeded(run_id=run_id, step=step)
    direct, careful = _dependents(workflow, step.name)
    # One statement: the run's counter of remaining steps goes down and, while the run is
    # active and has steps left, so do the dependents' pending-dependency counters; a
    # plain dependent whose last dependency this was is queued in the same UPDATE (a map
    # step, or one with a condition, is made ready below). Dependents are found by index
    # (the run's steps, or (run, name)), never by a scan of the plan. A cancelled (or
    # failed) run queues nothing after this step. While a run compensates,
    # steps_remaining counts its compensations: a step of the plan that finishes
    # meanwhile (it was running) does not touch it, but gets a compensation of its own.
    if found is None:
        with prepared.cursor() as cursor:
            cursor.execute(_DEPENDENTS_SQL, _dependents_params(run_id, direct, careful))
            found = cursor.fetchall()
    if not found or found[0][1] not in RUN_ACTIVE:
        # The run compensates (the counter UPDATE matched no row: it exists, this step's
        # row refers to it), or was cancelled or failed while this step ran: nothing
        # follows this step, but its compensation, if it names one, must run.
        return compensate.compensate_late_step(run_id=run_id, step=step, workflow=workflow)
    if int(found[0][0]) == 0:
        _succeed_run(run_id, workflow)
        return []
    rows = [row[2:] for row in found if row[2] is not None]
    queued: list[int] = []
    for step_id, key, name, pending, status in rows:
        if pending != 0:
            continue
        if name in careful:  # a map step, or one with a condition
            queued.extend(make_ready(run_id, Step.objects.get(pk=step_id), workflow))
            continue
        if status != StepStatus.QUEUED:
            raise RuntimeError(f"step {key} was not pending")
        events.append_event(run_id, events.STEP_QUEUED, step_id=step_id, step=key)
        queued.append(step_id)
    return queued


# The run's remaining-steps counter, then the dependents' counters (step_succeeded).
_DEPENDENTS_CTES = (
    """
    r AS (
        UPDATE runs_run SET steps_remaining = steps_remaining - 1
        WHERE id = %(run)s AND status <> %(compensating)s {only_if}
        RETURNING steps_remaining, status
    ), d AS (
        UPDATE runs_step
        SET pending_deps = pending_deps - 1,
            status = CASE WHEN pending_deps = 1 AND status = %(pending)s
                          AND name = ANY(%(plain)s) THEN %(queued)s ELSE status END,
            queued_at = CASE WHEN pending_deps = 1 AND status = %(pending)s
                             AND name = ANY(%(plain)s) THEN statement_timestamp()
                             ELSE queued_at END
        WHERE run_id = %(run)s AND name = ANY(%(names)s) AND parent_id IS NULL
          AND (SELECT steps_remaining FROM r) <> 0
          AND (SELECT status FROM r) = ANY("""
    + sql_array(RUN_ACTIVE)
    + """)
        RETURNING id, key, name, pending_deps, status
    )"""
)
_DEPENDENTS_SQL = f"""
    WITH {_DEPENDENTS_CTES.format(only_if="")}
    SELECT r.steps_remaining, r.status, d.id, d.key, d.name, d.pending_deps, d.status
    FROM r LEFT JOIN d ON true
"""
# The finish of a step of the plan: fence, claim, step, run counter, dependents.
_SUCCEED_AND_DEPENDENTS_SQL = f"""{_FENCE_CTES}, done AS ({_STEP_SUCCEEDS}
        RETURNING id
    ), {_DEPENDENTS_CTES.format(only_if="AND EXISTS (SELECT 1 FROM done)")}
    SELECT (SELECT count(*) FROM done), (SELECT count(*) FROM claim),
           r.steps_remaining, r.status, d.id, d.key, d.name, d.pending_deps, d.status
    FROM (SELECT 1) AS one LEFT JOIN r ON true LEFT JOIN d ON true
"""


def _dependents_params(run_id: uuid.UUID, direct: list[str], careful: list[str]) -> dict[str, Any]:
    return {
        "run": run_id,
        "names": direct + careful,
        "plain": direct,
        "pending": StepStatus.PENDING,
        "queued": StepStatus.QUEUED,
        "compensating": RunStatus.COMPENSATING,
    }


_DEPENDENTS: dict[int, tuple[Workflow, dict[str, tuple[list[str], list[str]]]]] = {}


def _dependents(workflow: Workflow, step_name: str) -> tuple[list[str], list[str]]:
    """The step's dependents: those queued directly by the UPDATE that makes them ready,
    and those make_ready() decides (map steps, expanded; steps with a condition, maybe
    skipped). Computed once per worker process (a workflow's definition does not change
    while the process runs)."""
    entry = _DEPENDENTS.get(id(workflow))
    if entry is None or entry[0] is not workflow:
        entry = _DEPENDENTS[id(workflow)] = (workflow, {})
    found = entry[1].get(step_name)
    if found is None:
        names = workflow.dependents(step_name)
        careful = {n for n in names if workflow.steps[n].is_map or workflow.steps[n].when}
        found = entry[1][step_name] = (
            [n for n in names if n not in careful],
            [n for n in names if n in careful],
        )
    return found


def make_ready(run_id: uuid.UUID, step: Step, workflow: Workflow) -> list[int]:
    """A pending step's dependencies are done: queue it (expand it, for a map step), or
    skip it if its condition is false (its dependents then proceed, as after a
    success)."""
    stepdef = workflow.steps[step.name]
    if stepdef.when is not None:
        from .conditions import condition_holds

        holds = condition_holds(run_id, step, stepdef)
        if holds is None:  # the condition raised: the step failed, and the run
            return []
        if not holds:
            n = Step.objects.filter(pk=step.id, status=StepStatus.PENDING).update(
                status=StepStatus.SKIPPED, finished_at=Now()
            )
            if n != 1:
                raise RuntimeError(f"step {step.key} was not pending")
            events.append_event(run_id, events.STEP_SKIPPED, step_id=step.id, step=step.key)
            return step_succeeded(run_id=run_id, step=step, workflow=workflow)
    if stepdef.is_map:
        from .mapping import expand

        return expand(run_id=run_id, parent=step, workflow=workflow)
    n = Step.objects.filter(pk=step.id, status=StepStatus.PENDING).update(
        status=StepStatus.QUEUED, queued_at=Now()
    )
    if n != 1:
        raise RuntimeError(f"step {step.key} was not pending")
    events.append_event(run_id, events.STEP_QUEUED, step_id=step.id, step=step.key)
    return [step.id]


# A batch succeeded: its map parent's count of batches to go, with the run row locked
# first (locks.py: the run before its other steps; the InitPlan runs before the parent's
# row is locked). NO KEY UPDATE is the lock the event log's seq takes anyway.
_BATCH_DONE_SQL = """
    WITH run AS (SELECT 1 FROM runs_run WHERE id = %(run)s FOR NO KEY UPDATE)
    UPDATE runs_step SET pending_children = pending_children - 1
    WHERE id = %(parent)s AND EXISTS (SELECT 1 FROM run)
    RETURNING pending_children
"""


def _batch_done(run_id: uuid.UUID, parent_id: int) -> int:
    with prepared.cursor() as cursor:
        cursor.execute(_BATCH_DONE_SQL, {"run": run_id, "parent": parent_id})
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def _count_items(parent: Step) -> int:
    return sum(len(items or []) for items in parent.batches.values_list("items", flat=True))


def _succeed_run(run_id: uuid.UUID, workflow: Workflow) -> None:
    leaves = [s for s in workflow.steps if not workflow.dependents(s)]
    result = dict(
        Step.objects.filter(run_id=run_id, name__in=leaves, parent__isnull=True).values_list(
            "name", "result"
        )
    )
    n = Run.objects.filter(
        pk=run_id, status__in=[RunStatus.RUNNING, RunStatus.NEEDS_RECONCILIATION]
    ).update(status=RunStatus.SUCCEEDED, result=result, finished_at=Now(), updated_at=Now())
    if n == 1:
        events.append_event(run_id, events.RUN_SUCCEEDED)
    else:
        log.info("run %s finished its steps but is no longer running; left as it is", run_id)
