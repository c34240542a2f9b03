"""What a run that stopped for good leaves open (docs/reliability.md#a-run-stopped-mid-effect).

A run stops for good when it is cancelled or starts compensating (on a cancel, or a
failure after steps with a compensation succeeded): its plan never resumes, so no
attempt of its plan's steps starts again. Every effect it left open must then end
converged, compensated or decided by a person, never "failed" with its outcome unknown:

- a step waiting for its retry, or queued holding an open claim (its last attempt
  crashed), ends `failed` with its claim closed as any step that gives up: `failed`
  when nothing can have happened (a guarded step retries only after `NotApplied`),
  `abandoned` for an idempotent effect of unknown outcome (it is safe to repeat with
  its key, and nothing is to be undone);
- an idempotent step that names a compensation and whose effect may have happened
  (its claim in flight or abandoned) goes to a person instead: its claim becomes
  unresolved, its probe (if it declares one) is asked first. Resolved as succeeded, its
  compensation runs (compensate_late_step); as failed, nothing is to be undone;
- every other step of its plan still queued (a batch of a map, a branch whose
  dependencies had succeeded) never starts: it goes back to `pending`, with one
  `steps_withdrawn` event naming them, so the run holds no queued step that waits for
  nothing and no figure counts it as waiting for a worker.

A failed run that did not compensate is not stopped for good: an operator may retry it,
which repeats an abandoned effect under its key and resends the steps waiting for a
retry (policies/operate.retry_steps).

Called with the run row locked (core/locks.py) by the transition that stopped the run,
and again whenever a step of a stopped run gives up later (state/run.fail_run).
"""

from __future__ import annotations

import uuid

from django.db import connection
from django.db.models import Exists, OuterRef, Q
from django.db.models.functions import Now

from runs import sql
from runs.engine.core.versions import workflow_of
from runs.models import Claim, Run, Step
from runs.record import events
from runs.states import ClaimStatus, EffectKind, RunStatus, StepStatus

from .steps import step_to_failed
from .unresolved import mark_unresolved

SQL = sql.load(__file__)
OPEN = (ClaimStatus.IN_FLIGHT, ClaimStatus.ABANDONED)


def stopped_for_good(run: Run) -> bool:
    """Cancelled, compensating, or failed after compensating: the plan never resumes."""
    if run.status in (RunStatus.CANCELLED, RunStatus.COMPENSATING):
        return True
    return run.status == RunStatus.FAILED and bool(run.ends_as)


def settle_open_effects(run: Run, *, why: str) -> None:
    """Close what the stopped run's plan left open (the module's rules). `run` is locked
    by the caller and stopped for good; `why` says how it stopped, for the records."""

    def claim_in(*statuses: ClaimStatus) -> Exists:
        return Exists(
            Claim.objects.filter(step_id=OuterRef("pk"), item_key__isnull=True, status__in=statuses)
        )

    steps = list(
        Step.objects.select_for_update(of=("self",))
        .filter(run_id=run.id, parent__isnull=True, compensates="")
        .filter(
            Q(status=StepStatus.RETRYING)
            | (Q(status=StepStatus.QUEUED) & claim_in(*OPEN))
            | (
                Q(status=StepStatus.FAILED, kind=EffectKind.IDEMPOTENT)
                & claim_in(ClaimStatus.ABANDONED)
            )
        )
        .order_by("id")
    )
    if steps:
        _close_open(run, steps, why)
    _withdraw_unstarted(run.id, why)


def _close_open(run: Run, steps: list[Step], why: str) -> None:
    compensable: set[str] = set()
    if any(s.kind == EffectKind.IDEMPOTENT for s in steps):
        workflow = workflow_of(run, doing="tell which of its open effects to undo")
        compensable = {name for name, s in workflow.steps.items() if s.compensate}
    for step in steps:
        if step.kind == EffectKind.IDEMPOTENT and step.name in compensable:
            _to_a_person(run.id, step, why)
        elif step.status != StepStatus.FAILED:
            _give_up(run.id, step, why)


def _withdraw_unstarted(run_id: uuid.UUID, why: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            SQL["withdraw_unstarted"],
            {"run": run_id, "pending": StepStatus.PENDING, "queued": StepStatus.QUEUED},
        )
        keys = sorted(key for (key,) in cursor.fetchall())
    if keys:
        events.append_event(run_id, events.StepsWithdrawn(steps=keys, why=why))


def _to_a_person(run_id: uuid.UUID, step: Step, why: str) -> None:
    if not Claim.objects.filter(step=step, item_key__isnull=True, status__in=OPEN).exists():
        # Nothing may have happened (no claim was taken yet): nothing to undo.
        _give_up(run_id, step, why)
        return
    reason = (
        f"{why} while the outcome of {step.key} was unknown; it names a compensation, so "
        "whether it happened decides whether it is undone"
    )
    n = Step.objects.filter(pk=step.id, status=step.status).update(
        status=StepStatus.UNRESOLVED, error=reason, next_attempt_at=None, finished_at=None
    )
    assert n == 1, "the run is locked and the step was read under it"
    mark_unresolved(
        run_id=run_id,
        step=step,
        attempt_number=step.attempts,
        reason=reason,
        probe_after=Now(),
        closing=OPEN,
    )


def _give_up(run_id: uuid.UUID, step: Step, why: str) -> None:
    # Its last attempt's outcome is unknown unless the kind says otherwise: a guarded
    # step retries only after NotApplied; an idempotent claim is abandoned (safe to repeat).
    # Not run.fail_step: the run has stopped already, and this is its settling.
    took = step_to_failed(
        run_id,
        step,
        error=f"{why} before its next attempt",
        was=step.status,
        maybe_applied=step.kind == EffectKind.IDEMPOTENT,
        next_attempt_at=None,
    )
    assert took, "the run is locked and the step was read under it"
