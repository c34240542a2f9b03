"""start_attempt(): queued → running under a new attempt, in one transaction.

The conditional UPDATE is the whole concurrency story: of any number of deliveries of
the same message, exactly one moves the step out of `queued`; the others change
nothing and return None.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, Field, Model, OuterRef
from django.db.models.functions import Now

from runs import events, prepared
from runs.models import Attempt, Claim, Run, Step
from runs.states import RUN_ACTIVE, AttemptStatus, ClaimStatus, EffectKind, RunStatus, StepStatus
from runs.workflows import registry
from runs.workflows.definition import StepDef, Workflow

from . import faults, keys
from .dispatch import publish_now
from .locks import lock_run

log = logging.getLogger(__name__)

# Kinds whose claim is taken when the attempt starts (before the effect runs).
CLAIM_AT_START = (EffectKind.IDEMPOTENT, EffectKind.GUARDED)


@dataclass
class Started:
    """Everything an executing attempt needs, loaded once."""

    step: Step
    run: Run
    attempt: Attempt
    workflow: Workflow
    stepdef: StepDef
    lease_seconds: float
    claim: Claim | None = None
    # The results of the step's dependencies (ctx.results), when the start read them.
    results: dict[str, Any] | None = None
    # A batch's: its map parent's plan revision (part of its items' claim keys).
    parent_revision: int | None = None
    # This worker's clock when the lease was last set (before the statement that set it
    # was sent): when a map's item fences renew it (mapping.py). Never a safety decision:
    # whether the lease is held is asked of the database.
    lease_from: float = field(default_factory=time.monotonic)
    # Set by the executor: on success, keep a single ready successor for this worker,
    # started in the finish's own transaction (continued: start_successor) or else after
    # its commit (continue_with), instead of publishing a message for it (execute.py).
    may_continue: bool = False
    continue_with: int | None = None
    continued: Started | None = None

    @property
    def is_batch(self) -> bool:
        return self.step.parent_id is not None


def active_run() -> Exists:
    """`EXISTS (the step's run is active)`: a correlated subquery that keeps an UPDATE
    of runs_step a single-table statement."""
    return Exists(Run.objects.filter(pk=OuterRef("run_id"), status__in=RUN_ACTIVE))


def compensating_run() -> Exists:
    """`EXISTS (the step's run is compensating)`: where compensation steps may start."""
    return Exists(Run.objects.filter(pk=OuterRef("run_id"), status=RunStatus.COMPENSATING))


def run_may_go_on(step: Step) -> Exists:
    """Where this step may start: an active run, or a compensating one for a
    compensation step."""
    return compensating_run() if step.compensates else active_run()


def lease_for(stepdef: StepDef) -> float:
    return stepdef.lease_seconds or float(settings.RUNS_LEASE_SECONDS)


def start_attempt(*, step_id: int, worker: str) -> Started | None:
    if not faults.enabled():
        # The common case, a queued step: one statement moves it to running, creates its
        # attempt and returns all the attempt needs (no read before, no re-read after).
        try:
            started = _start_queued(step_id, worker)
        except (_NotStartableHere, ClaimNotTakeable):
            started = None  # rolled back; the careful path below says why
        if started is not None:
            return started
    step = Step.objects.select_related("run").filter(pk=step_id).first()
    if step is None:
        log.info("step %s does not exist (deleted?); message dropped", step_id)
        return None
    run = step.run
    wf = registry.get(run.workflow, run.version)
    stepdef = wf.stepdef(step.name) if wf is not None else None
    if wf is None or stepdef is None:
        refuse(step, worker, f"workflow {run.workflow} v{run.version} is unknown to its worker")
        return None
    if stepdef.is_wait:
        # Waits hold no worker and take no attempt: parked or ended in one transaction.
        from .waits import reach_wait

        outcome = reach_wait(step_id=step.id, workflow=wf, stepdef=stepdef)
        log.info("wait step %s: %s", step.key, outcome)
        return None
    if step.status == StepStatus.RUNNING and step.current_attempt_id is not None:
        # A redelivery that finds an expired lease may take over; a live one wins.
        from .recover import recover_attempt

        if not recover_attempt(attempt_id=step.current_attempt_id):
            return None
    if step.status not in (StepStatus.QUEUED, StepStatus.RETRYING, StepStatus.RUNNING):
        return None
    if step.parent_id is None and step.kind != EffectKind.TRANSACTIONAL:
        faults.hit("before_claim", step.name)

    try:
        started = _start_queued(step_id, worker)
    except _NotStartableHere:
        started = None
    except ClaimNotTakeable as exc:
        # Nothing was written (the start rolled back); say why on the step.
        refuse(step, worker, str(exc))
        return None
    if started is None:
        _republish_if_early(step_id)
    return started


def _republish_if_early(step_id: int) -> None:
    """A retry's message can arrive before its time: Celery's countdown runs on the
    worker's clock, `next_attempt_at` on the database's. Send it again with the delay
    that remains on the database's clock, rather than leave the step for the sweeper's
    republish bound."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXTRACT(EPOCH FROM next_attempt_at - statement_timestamp())::float "
            "FROM runs_step WHERE id = %s AND status = %s "
            "AND next_attempt_at > statement_timestamp()",
            [step_id, StepStatus.RETRYING],
        )
        row = cursor.fetchone()
    if row is not None:
        remaining = max(0.0, float(row[0]))
        log.info("step %s woke %.3fs early; republished for its time", step_id, remaining)
        publish_now([step_id], countdown=remaining)


class _NotStartableHere(Exception):
    """The step's workflow (or the step) is unknown to this worker, or the step is a
    wait: roll the start back and let the careful path handle it."""


def _columns(model: type[Model], alias: str) -> tuple[str, list[str]]:
    fields = model._meta.concrete_fields
    return ", ".join(f"{alias}.{f.column}" for f in fields), [f.attname for f in fields]


def sql_array(values: Any) -> str:
    """A constant text array written into a statement (status names of our own enums),
    rather than a parameter psycopg would encode for every execution."""
    items = [str(v) for v in values]
    assert all(v.replace("_", "").isalnum() for v in items), items
    return "ARRAY[" + ", ".join(f"'{v}'" for v in items) + "]::text[]"


def _start_sql() -> tuple[str, list[str], list[str]]:
    """One statement: queued (or retrying and due) → running, the attempt inserted and
    made current, and what the attempt needs returned: the step, its run, the results of
    its dependencies (a batch's are its map parent's).

    The UPDATE is on one table with one WHERE on the row being updated (the run's
    status read by primary key in a scalar subquery (a compensation step's run must be
    compensating, any other step's active); as an EXISTS the planner may turn
    it into a join that scans every active run, bench/scale.py showed): a second
    delivery blocked on this row re-checks the status of the row's newest version (READ
    COMMITTED re-evaluation), so it can never reopen a step that started and finished
    meanwhile. The run's status is read FOR KEY SHARE: at its newest version, after
    waiting for a cancel (or any transition that locks the run FOR UPDATE, locks.py) to
    commit, and held until the start commits, so such a transition waits for a start in
    flight (a start blocked on its step's row included) instead of committing under it.
    A plain subquery reads the statement's snapshot: a start blocked on its step while a
    cancel committed would start the step in the cancelled run. The attempt's id is
    taken from its sequence in the UPDATE itself (the foreign key is checked at commit).
    A retry is due by statement_timestamp(), the clock Django's Now() reads, which set
    its next_attempt_at."""
    step_cols, step_names = _columns(Step, "s")
    run_cols, run_names = _columns(Run, "r")
    sql = f"""
        WITH s AS (
            UPDATE runs_step
            SET status = %(running)s, attempts = attempts + 1, started_at = statement_timestamp(),
                next_attempt_at = NULL, error = '',
                current_attempt_id = nextval(pg_get_serial_sequence('runs_attempt', 'id'))
            WHERE id = %(step_id)s
              AND (status = %(queued)s
                   OR (status = %(retrying)s AND next_attempt_at <= statement_timestamp()))
              AND (SELECT runs_run.status FROM runs_run WHERE runs_run.id = runs_step.run_id
                   FOR KEY SHARE)
                  = ANY(CASE WHEN compensates = '' THEN {sql_array(RUN_ACTIVE)}
                             ELSE {sql_array([RunStatus.COMPENSATING])} END)
            RETURNING *
        ), a AS (
            INSERT INTO runs_attempt (id, step_id, run_id, number, status, worker, started_at,
                                      lease_expires_at, error)
            SELECT current_attempt_id, id, run_id, attempts, %(running_attempt)s, %(worker)s,
                   statement_timestamp(),
                   statement_timestamp() + make_interval(secs => %(lease)s), ''
            FROM s
            RETURNING id
        )
        SELECT {step_cols}, {run_cols},
               (SELECT coalesce(jsonb_object_agg(d.name, d.result), '{{}}'::jsonb)
                FROM runs_step d
                WHERE d.run_id = s.run_id AND d.parent_id IS NULL
                  AND d.name = ANY(CASE WHEN s.parent_id IS NULL THEN s.depends_on ELSE
                      (SELECT p.depends_on FROM runs_step p WHERE p.id = s.parent_id) END)),
               (SELECT count(*) FROM a),
               (SELECT p.plan_revision FROM runs_step p WHERE p.id = s.parent_id)
        FROM s JOIN runs_run r ON r.id = s.run_id
    """
    return sql, step_names, run_names


_START_SQL: tuple[str, list[str], list[str]] | None = None


def _start_queued(step_id: int, worker: str) -> Started | None:
    """Start the step if it is queued (or retrying and due): one transaction, whose
    events are written together at its end. None if it is not startable."""
    with transaction.atomic(), events.buffered():
        return _start_in_transaction(step_id, worker)


def _start_in_transaction(step_id: int, worker: str) -> Started | None:
    """The start's statements, in the caller's transaction (its events in the caller's
    buffer)."""
    global _START_SQL
    if _START_SQL is None:
        _START_SQL = _start_sql()
    sql, step_names, run_names = _START_SQL
    default_lease = float(settings.RUNS_LEASE_SECONDS)
    sent = time.monotonic()
    with prepared.cursor() as cursor:
        cursor.execute(
            sql,
            {
                "step_id": step_id,
                "running": StepStatus.RUNNING,
                "queued": StepStatus.QUEUED,
                "retrying": StepStatus.RETRYING,
                "running_attempt": AttemptStatus.RUNNING,
                "worker": worker,
                "lease": default_lease,
            },
        )
        row = cursor.fetchone()
    if row is None:
        return None
    n_step, n_run = len(step_names), len(run_names)
    step = Step.from_db("default", step_names, _decoded(Step, step_names, row[:n_step]))
    run = Run.from_db("default", run_names, _decoded(Run, run_names, row[n_step : n_step + n_run]))
    results, _, parent_revision = row[n_step + n_run :]
    if isinstance(results, str):  # jsonb arrives as text on Django's connections
        results = json.loads(results)
    step.run = run
    wf = registry.get(run.workflow, run.version)
    stepdef = wf.stepdef(step.name) if wf is not None else None
    if wf is None or stepdef is None or stepdef.is_wait:
        # Unknown here, or a wait (which takes no attempt): the careful path decides.
        raise _NotStartableHere

    lease = lease_for(stepdef)
    assert step.current_attempt_id is not None
    if lease != default_lease:
        from .complete import renew_lease

        renew_lease(step.current_attempt_id, lease)
    attempt = Attempt(
        id=step.current_attempt_id,
        step_id=step.id,
        run_id=run.id,
        number=step.attempts,
        worker=worker,
        status=AttemptStatus.RUNNING,
    )
    step.current_attempt = attempt
    # The run's status as of this statement's snapshot: a run already running never
    # goes back to pending, so only a pending one needs the conditional UPDATE.
    if run.status == RunStatus.PENDING and Run.objects.filter(
        pk=run.id, status=RunStatus.PENDING
    ).update(status=RunStatus.RUNNING, updated_at=Now()):
        events.append_event(run.id, events.RUN_STARTED)
    run.status = RunStatus.RUNNING
    events.append_event(
        run.id,
        events.STEP_STARTED,
        step_id=step.id,
        attempt_number=attempt.number,
        step=step.key,
        worker=worker,
    )
    claim = None
    if step.parent_id is None and step.kind in CLAIM_AT_START:
        claim = take_claim(run=run, step=step, stepdef=stepdef, attempt=attempt, item=None)
    return Started(
        step=step,
        run=run,
        attempt=attempt,
        workflow=wf,
        stepdef=stepdef,
        lease_seconds=lease,
        claim=claim,
        results=results,
        parent_revision=parent_revision,
        lease_from=sent,
    )


def start_successor(previous: Started, step_id: int) -> Started | None:
    """Start the one step that `previous`'s success made ready, inside the transaction
    that records that success, so that the finish and the successor's start commit
    together: one commit per step of a chain instead of two. None: not started here
    (the caller starts it after the commit, as a message would).

    Committing the start early changes nothing a crash can observe: a worker that dies
    after this commit leaves the successor running under a lease that the sweeper
    recovers, as if it had died just after a start of its own. Only where nothing in the
    start can fail after its UPDATE without taking the finish down with it: every
    dependent `previous` can make ready is a plain step of its workflow (not a wait, a
    map or a conditional step: the careful path decides those). A successor that takes
    a claim starts under a savepoint, since an existing claim may refuse it. Not with
    fault injection, whose `after_commit` point sits between the two."""
    if faults.enabled():
        return None
    kinds = _plain_dependent_kinds(previous.workflow, previous.step)
    if kinds is None:
        return None
    worker = previous.attempt.worker
    if not any(kind in CLAIM_AT_START for kind in kinds):
        return _start_in_transaction(step_id, worker)
    mark = events.buffer_mark()
    try:
        with transaction.atomic():  # a savepoint
            return _start_in_transaction(step_id, worker)
    except ClaimNotTakeable:
        events.rewind_buffer(mark)  # the savepoint's events went with it
        return None


_PLAIN_DEPENDENTS: dict[tuple[int, str], tuple[Workflow, tuple[str, ...] | None]] = {}


def _plain_dependent_kinds(workflow: Workflow, step: Step) -> tuple[str, ...] | None:
    """The effect kinds of the steps `step`'s success can make ready, if all of its
    dependents are plain (no wait, map or condition); else None.
    Computed once per process per step name (definitions do not change meanwhile)."""
    if step.parent_id is not None or step.compensates:
        return None  # a batch completes its map; a compensation, the compensating run
    key = (id(workflow), step.name)
    entry = _PLAIN_DEPENDENTS.get(key)
    if entry is None or entry[0] is not workflow:
        defs = [workflow.steps[n] for n in workflow.dependents(step.name)]
        plain = bool(defs) and all(not (d.is_wait or d.is_map or d.when) for d in defs)
        # A run that began compensating meanwhile makes a compensation ready instead.
        kinds = [d.kind for d in defs] + [c.kind for c in workflow.compensations.values()]
        entry = _PLAIN_DEPENDENTS[key] = (workflow, tuple(map(str, kinds)) if plain else None)
    return entry[1]


def _decoded(model: type[Model], names: list[str], values: Any) -> list[Any]:
    """Raw column values as the model's fields hold them (JSON columns come back from
    a raw cursor already decoded by psycopg; the fields' from_db_value expects text)."""
    fields = _fields_by_attname(model)
    out = list(values)
    for i, name in enumerate(names):
        convert = getattr(fields[name], "from_db_value", None)
        if convert is not None and out[i] is not None:
            out[i] = convert(out[i], None, connection)
    return out


@cache
def _fields_by_attname(model: type[Model]) -> dict[str, Field[Any, Any]]:
    return {f.attname: f for f in model._meta.concrete_fields}


def refuse(step: Step, worker: str, reason: str) -> None:
    """Leave the step as it is (queued, for a worker that knows its workflow; the
    sweeper republishes it) and record why, once per distinct reason."""
    log.warning("refusing step %s of run %s: %s", step.key, step.run_id, reason)
    with transaction.atomic():
        lock_run(step.run_id)  # the run before its steps (locks.py)
        if (
            Step.objects.filter(pk=step.id, status=StepStatus.QUEUED)
            .exclude(error=reason)
            .update(error=reason)
        ):
            events.append_event(
                step.run_id,
                events.STEP_REFUSED,
                step_id=step.id,
                step=step.key,
                reason=reason,
                worker=worker,
            )


def step_claim_key(run: Run, step: Step, stepdef: StepDef) -> str:
    digest = keys.digest(run.input) if stepdef.key_includes_input else None
    return keys.step_key(run.id, step.name, step.plan_revision, digest, step.claim_generation)


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


class ClaimNotTakeable(Exception):
    pass


__all__ = [
    "Started",
    "refuse",
    "start_attempt",
    "start_successor",
    "step_claim_key",
    "take_claim",
]
