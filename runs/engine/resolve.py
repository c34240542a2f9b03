"""resolve_claim(): the only writer of claim outcomes after an effect became uncertain.

Someone (an operator, a probe, a script) states what happened to an unresolved claim's
effect, with a note and evidence. The claim's status moves by compare-and-set
(`… WHERE status = 'unresolved'`), so of two racing resolutions exactly one wins; the
other is told who won and when. The resolution is stored on the claim and as an event,
and a database trigger keeps it from ever being edited (runs/migrations/0003).

What the outcome does to the step and the run is the engine's rule, here:
- succeeded: the step succeeds with the given result and the run goes on.
- failed (the effect did not happen): the step is retried under its policy with a new
  claim (`…/retry-<n>`) if attempts remain; otherwise it fails, and so does the run.
- A run that already finished (failed or cancelled) schedules nothing: the outcome is
  recorded on the claim and the step, and no successor is queued or map expanded.

The operator side (taking claims, bulk decisions, pages) lives in `reconciliation/`
and calls this; the engine never imports it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.db.models.functions import Now

from runs import events
from runs.models import Claim, Run, Step
from runs.states import RUN_FINISHED, ClaimStatus, RunStatus, StepStatus
from runs.workflows import registry

from .complete import ensure_json, fail_run, step_succeeded
from .dispatch import publish_on_commit
from .errors import EngineError

OUTCOMES = (ClaimStatus.SUCCEEDED, ClaimStatus.FAILED)


class ResolutionError(EngineError):
    """A resolution was refused; the message says why, and nothing was changed."""


class ClaimNotFound(ResolutionError):
    pass


class ClaimAlreadyResolved(ResolutionError):
    def __init__(self, claim: Claim) -> None:
        when = claim.resolved_at.isoformat(timespec="seconds") if claim.resolved_at else "?"
        super().__init__(
            f"claim {claim.key} was already resolved as {claim.status} "
            f"by {claim.resolved_by} at {when}"
        )
        self.claim = claim


class ClaimNotUnresolved(ResolutionError):
    def __init__(self, claim: Claim) -> None:
        super().__init__(
            f"claim {claim.key} is {claim.status}, not unresolved: only unresolved claims "
            "can be resolved"
        )
        self.claim = claim


class InvalidResolution(ResolutionError):
    pass


@dataclass(frozen=True)
class Resolution:
    claim: Claim
    step_status: str
    run_status: str


def actor_name(actor: AbstractBaseUser | str) -> str:
    name = actor if isinstance(actor, str) else actor.get_username()
    name = name.strip()
    if not name:
        raise InvalidResolution("a resolution needs an actor (a user or a name)")
    return name


def _json(value: Any, what: str) -> Any:
    try:
        return ensure_json(value, what)
    except TypeError as exc:
        raise InvalidResolution(str(exc)) from exc


def validate_resolution(outcome: str, note: str, result: Any) -> str:
    """Check a decision before anything is written; return the cleaned note."""
    if outcome not in OUTCOMES:
        raise InvalidResolution(f"outcome must be 'succeeded' or 'failed', not {outcome!r}")
    note = (note or "").strip()
    if not note:
        raise InvalidResolution("a resolution needs a note saying why")
    if outcome == ClaimStatus.FAILED and result is not None:
        raise InvalidResolution("a failed outcome has no result (the effect did not happen)")
    return note


def resolve_claim(
    claim: Claim | int,
    outcome: str,
    *,
    actor: AbstractBaseUser | str,
    note: str,
    result: Any = None,
    evidence: Any = None,
) -> Resolution:
    claim_id = claim.pk if isinstance(claim, Claim) else int(claim)
    note = validate_resolution(outcome, note, result)
    who = actor_name(actor)
    result = _json(result, "result")
    evidence = _json(evidence, "evidence")

    with transaction.atomic():
        # Locked: a late guarded result may be adding evidence at this moment.
        current = Claim.objects.select_for_update().filter(pk=claim_id).values("evidence").first()
        if current is None:
            raise ClaimNotFound(f"no claim with id {claim_id}")
        merged = dict(current["evidence"] or {})
        if evidence is not None:
            merged["resolution"] = evidence
        n = Claim.objects.filter(pk=claim_id, status=ClaimStatus.UNRESOLVED).update(
            status=outcome,
            resolved_by=who,
            resolved_at=Now(),
            resolution_note=note,
            evidence=merged or None,
            result=result if outcome == ClaimStatus.SUCCEEDED else None,
            completed_at=Now(),
        )
        if n != 1:
            existing = Claim.objects.get(pk=claim_id)
            if existing.resolved_at is not None:
                raise ClaimAlreadyResolved(existing)
            raise ClaimNotUnresolved(existing)
        resolved = Claim.objects.get(pk=claim_id)
        events.append_event(
            resolved.run_id,
            events.CLAIM_RESOLVED,
            step_id=resolved.step_id,
            key=resolved.key,
            outcome=outcome,
            actor=who,
            note=note,
            evidence=evidence,
        )
        # The run row is locked by append_event above: its status cannot change under us.
        run = Run.objects.get(pk=resolved.run_id)
        step = Step.objects.select_for_update().get(pk=resolved.step_id)
        if step.status != StepStatus.UNRESOLVED:
            # A map item's claim: the batch carries on by itself; nothing to move.
            return Resolution(resolved, step.status, run.status)
        finished = run.status in RUN_FINISHED
        if outcome == ClaimStatus.SUCCEEDED:
            _step_resolved_succeeded(run, step, result, who, schedule=not finished)
        else:
            _step_resolved_failed(run, step, who, schedule=not finished)
        _resume_if_reconciled(run.id)
        step.refresh_from_db(fields=["status"])
        run.refresh_from_db(fields=["status"])
        return Resolution(resolved, step.status, run.status)


def _step_resolved_succeeded(
    run: Run, step: Step, result: Any, who: str, *, schedule: bool
) -> None:
    workflow = registry.get(run.workflow, run.version)
    if schedule and workflow is None:
        raise ResolutionError(
            f"this process does not know workflow {run.workflow} v{run.version}, so it "
            "cannot queue the steps that follow; resolve from a process that does"
        )
    n = Step.objects.filter(pk=step.id, status=StepStatus.UNRESOLVED).update(
        status=StepStatus.SUCCEEDED, result=result, error="", finished_at=Now()
    )
    assert n == 1
    events.append_event(
        run.id, events.STEP_SUCCEEDED, step_id=step.id, step=step.key, resolved_by=who
    )
    if schedule:
        assert workflow is not None
        publish_on_commit(step_succeeded(run_id=run.id, step=step, workflow=workflow))


def _step_resolved_failed(run: Run, step: Step, who: str, *, schedule: bool) -> None:
    if schedule and step.has_attempts_left:
        n = Step.objects.filter(pk=step.id, status=StepStatus.UNRESOLVED).update(
            status=StepStatus.QUEUED,
            queued_at=Now(),
            claim_generation=F("claim_generation") + 1,
        )
        assert n == 1
        events.append_event(
            run.id,
            events.STEP_QUEUED,
            step_id=step.id,
            step=step.key,
            reason=f"claim resolved as failed by {who}; retrying",
        )
        publish_on_commit([step.id])
        return
    if schedule:
        error = f"claim resolved as failed by {who} and no attempts remain"
    else:
        error = f"claim resolved as failed by {who}; the run had already finished ({run.status})"
    n = Step.objects.filter(pk=step.id, status=StepStatus.UNRESOLVED).update(
        status=StepStatus.FAILED, error=error, finished_at=Now()
    )
    assert n == 1
    events.append_event(run.id, events.STEP_FAILED, step_id=step.id, step=step.key, error=error)
    fail_run(run.id, f"step {step.key} failed: {error}")


def _resume_if_reconciled(run_id: uuid.UUID) -> None:
    """needs_reconciliation → running once no unresolved claim is left. Resolutions of
    one run serialize on its row (append_event), so the last one sees all the others."""
    unresolved = Claim.objects.filter(run_id=OuterRef("pk"), status=ClaimStatus.UNRESOLVED)
    if (
        Run.objects.filter(pk=run_id, status=RunStatus.NEEDS_RECONCILIATION)
        .filter(~Exists(unresolved))
        .update(status=RunStatus.RUNNING, updated_at=Now())
    ):
        events.append_event(run_id, events.RUN_RESUMED)


__all__ = [
    "ClaimAlreadyResolved",
    "ClaimNotFound",
    "ClaimNotUnresolved",
    "InvalidResolution",
    "Resolution",
    "ResolutionError",
    "resolve_claim",
]
