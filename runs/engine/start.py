"""start_attempt(): queued → running under a new attempt, in one transaction.

The conditional UPDATE is the whole concurrency story: of any number of deliveries of
the same message, exactly one moves the step out of `queued`; the others change
nothing and return None.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.db.models.functions import Now

from runs import events
from runs.models import Attempt, Claim, Run, Step
from runs.states import RUN_ACTIVE, ClaimStatus, EffectKind, RunStatus, StepStatus
from runs.workflows import registry
from runs.workflows.definition import StepDef, Workflow

from . import faults, keys
from .dispatch import publish_now
from .timing import db_now_plus

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

    lease = lease_for(stepdef)
    try:
        started = _start(step, run, wf, stepdef, worker, lease)
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
            "SELECT EXTRACT(EPOCH FROM next_attempt_at - now())::float FROM runs_step "
            "WHERE id = %s AND status = %s AND next_attempt_at > now()",
            [step_id, StepStatus.RETRYING],
        )
        row = cursor.fetchone()
    if row is not None:
        remaining = max(0.0, float(row[0]))
        log.info("step %s woke %.3fs early; republished for its time", step_id, remaining)
        publish_now([step_id], countdown=remaining)


def _start(
    step: Step, run: Run, wf: Workflow, stepdef: StepDef, worker: str, lease: float
) -> Started | None:
    step_id = step.id
    with transaction.atomic():
        # One table, one WHERE on the row being updated: a second delivery blocked on
        # this row re-checks the status of the row's newest version (READ COMMITTED
        # re-evaluation), so it can never reopen a step that started and finished
        # meanwhile. A filter across the run relation would compile to
        # `id IN (SELECT …)`, whose status test stays on the old snapshot.
        n = (
            Step.objects.filter(run_may_go_on(step), pk=step_id)
            .filter(
                Q(status=StepStatus.QUEUED)
                | Q(status=StepStatus.RETRYING, next_attempt_at__lte=Now())
            )
            .update(
                status=StepStatus.RUNNING,
                attempts=F("attempts") + 1,
                started_at=Now(),
                next_attempt_at=None,
                error="",
            )
        )
        if n != 1:
            return None
        step.refresh_from_db()
        attempt = Attempt.objects.create(
            step=step,
            run=run,
            number=step.attempts,
            worker=worker,
            lease_expires_at=db_now_plus(lease),
        )
        attempt.refresh_from_db()
        Step.objects.filter(pk=step_id).update(current_attempt=attempt)
        step.current_attempt = attempt
        if Run.objects.filter(pk=run.id, status=RunStatus.PENDING).update(
            status=RunStatus.RUNNING, updated_at=Now()
        ):
            events.append_event(run.id, events.RUN_STARTED)
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
    )


def refuse(step: Step, worker: str, reason: str) -> None:
    """Leave the step as it is (queued, for a worker that knows its workflow; the
    sweeper republishes it) and record why, once per distinct reason."""
    log.warning("refusing step %s of run %s: %s", step.key, step.run_id, reason)
    with transaction.atomic():
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
    claim = Claim.objects.get(pk=row[0])
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


__all__ = ["Started", "refuse", "start_attempt", "step_claim_key", "take_claim"]
