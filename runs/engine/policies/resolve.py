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

preview_resolution() says what a decision would do, without writing: it reads the
same rows this rule reads, which is why it lives beside it (change one, change both).

The operator side (taking claims, bulk decisions, pages) lives in `reconciliation/`
and calls this; the engine never imports it. What the operator side keeps about an
unresolved claim and must end with it (its take, "on it") hangs on `claim_resolved`,
sent inside the resolution's transaction by every way in: an operator, a probe (the
worker's or "check again"), a script.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef
from django.db.models.functions import Now
from django.dispatch import Signal

from runs.engine.attempts.slots import hand_over
from runs.engine.core import keys
from runs.engine.core.jsonvalues import ensure_json
from runs.engine.core.locks import lock_run
from runs.engine.core.publish import publish_on_commit
from runs.engine.core.versions import workflow_of
from runs.engine.state.ready import succeed_step
from runs.engine.state.run import fail_step, statuses_going_on
from runs.engine.state.steps import step_to_queued
from runs.errors import (
    ClaimAlreadyResolved,
    ClaimNotFound,
    ClaimNotUnresolved,
    InvalidResolution,
)
from runs.models import Attempt, Claim, Run, Step
from runs.ops import tracing
from runs.principals import actor_name
from runs.record import events
from runs.record.history import snapshot
from runs.resolutions import (
    COMPENSATES,
    FAILS_RUN,
    FINISHES_RUN,
    NOT_UNRESOLVED,
    RECORDED_ONLY,
    REFUSED,
    RESUMES,
    RETRIES,
    Preview,
    Resolution,
)
from runs.states import ClaimStatus, RunStatus, StepStatus
from runs.workflows import registry
from runs.workflows.limits import Scope

OUTCOMES = (ClaimStatus.SUCCEEDED, ClaimStatus.FAILED)

# Sent by resolve_claim inside its transaction, once the claim is resolved (claim_id,
# outcome, actor): a receiver's writes commit or roll back with the resolution. The
# reconciliation app releases the claim's take on it (reconciliation/apps.py).
claim_resolved = Signal()


def _json(value: Any, what: str) -> Any:
    try:
        return ensure_json(value, what)
    except TypeError as exc:
        raise InvalidResolution(str(exc), field=what) from exc


def validate_outcome(outcome: str) -> None:
    """Check that `outcome` is one a resolution may state (`succeeded` or `failed`),
    before anything is read or written. Returns nothing; raises InvalidResolution
    (field `outcome`) for any other."""
    if outcome not in OUTCOMES:
        raise InvalidResolution(
            f"outcome must be 'succeeded' or 'failed', not {outcome!r}", field="outcome"
        )


def validate_resolution(outcome: str, note: str, result: Any) -> str:
    """Check a decision before anything is written; return the cleaned note. Raises
    InvalidResolution (with the field) for an unknown outcome, an empty note or one
    with a NUL, or a result given with a failed outcome."""
    validate_outcome(outcome)
    note = (note or "").strip()
    if not note:
        raise InvalidResolution("a resolution needs a note saying why", field="note")
    if "\x00" in note:
        raise InvalidResolution(
            "the note contains a NUL character, which cannot be stored", field="note"
        )
    if outcome == ClaimStatus.FAILED and result is not None:
        raise InvalidResolution(
            "a failed outcome has no result (the effect did not happen)", field="result"
        )
    return note


def resolve_claim(
    claim: Claim | int,
    outcome: str,
    *,
    actor: AbstractBaseUser | str,
    note: str,
    result: Any = None,
    evidence: Any = None,
    precondition: Callable[[int, Any], None] | None = None,
) -> Resolution:
    """Resolve an unresolved claim as `outcome` (see the module's docstring for what
    that does to its step and its run). Refuses, with nothing written: InvalidResolution,
    ClaimNotFound, ClaimAlreadyResolved, ClaimNotUnresolved, ResolutionError.

    `precondition(claim_id, evidence)`, if given, is called once the claim is locked,
    with the evidence it holds then (nothing can add to it, or take it, until this
    transaction ends), before anything is written: whatever it raises refuses the
    resolution, nothing written. A bulk decision sets aside that way the claims whose
    evidence contradicts it, or that another operator holds (reconciliation/services.py)."""
    began = tracing.now_ns()
    claim_id = claim.pk if isinstance(claim, Claim) else int(claim)
    note = validate_resolution(outcome, note, result)
    who = actor_name(actor)
    result = _json(result, "result")
    evidence = _json(evidence, "evidence")

    with transaction.atomic():
        # Lock order (locks.py): the run, then the claim's step, then the claim (a late
        # guarded result may be adding evidence to it at this moment). An in-flight
        # claim belongs to a live attempt, whose finish holds its rows before the run's:
        # refuse it without waiting for them. Only a resolution moves an unresolved
        # claim, and every resolution takes the run's lock first.
        found = Claim.objects.filter(pk=claim_id).values("run_id", "step_id", "status").first()
        if found is None:
            raise ClaimNotFound(f"no claim with id {claim_id}")
        if found["status"] != ClaimStatus.UNRESOLVED:
            _refuse_resolved(claim_id)
        run = lock_run(found["run_id"])
        step = Step.objects.select_for_update().filter(pk=found["step_id"]).first()
        current = (
            Claim.objects.select_for_update()
            .filter(pk=claim_id)
            .values("evidence", "status")
            .first()
        )
        if run is None or step is None or current is None:  # purged meanwhile (retention)
            raise ClaimNotFound(f"no claim with id {claim_id}")
        if precondition is not None and current["status"] == ClaimStatus.UNRESOLVED:
            precondition(claim_id, current["evidence"])  # (one resolved meanwhile: refused below)
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
            # A probe still asking has nothing left to decide (its answer will be
            # superseded), and a resolved claim can no longer be written.
            probe_lease_expires_at=None,
        )
        if n != 1:
            _refuse_resolved(claim_id)
        resolved = Claim.objects.get(pk=claim_id)
        if resolved.hold_key:
            # Decided: the steps its key held may start (attempts/slots.py).
            held = Scope(f"hold {resolved.hold_key}", hold=resolved.hold_key)
            transaction.on_commit(lambda: hand_over([held]))
        claim_resolved.send(Claim, claim_id=claim_id, outcome=outcome, actor=who)
        if tracing.on():
            _trace_resolution(run, resolved, who, began)
        events.append_event(
            resolved.run_id,
            events.ClaimResolved(
                key=resolved.key, outcome=outcome, actor=who, note=note, evidence=evidence
            ),
            step_id=resolved.step_id,
        )
        run.refresh_from_db(fields=["status"])
        if step.status != StepStatus.UNRESOLVED:
            # A map item's claim: the batch carries on by itself; nothing to move.
            return Resolution(resolved, step.status, run.status)
        # A run that stopped (finished, or compensating for a plan step) schedules
        # nothing of its plan: a step queued there would never start.
        going_on = run.status in statuses_going_on(step)
        if outcome == ClaimStatus.SUCCEEDED:
            _step_resolved_succeeded(run, step, result, who, run_goes_on=going_on)
        else:
            _step_resolved_failed(run, step, who, run_goes_on=going_on)
        _resume_if_reconciled(run.id)
        step.refresh_from_db(fields=["status"])
        run.refresh_from_db(fields=["status"])
        return Resolution(resolved, step.status, run.status)


def _trace_resolution(run: Run, claim: Claim, who: str, began: int) -> None:
    """The resolution's span, once it commits: in the run's trace, linked to the span of
    the attempt that left the claim unknown (runs/ops/tracing.py)."""
    attempt_span = (
        Attempt.objects.filter(pk=claim.attempt_id).values_list("span_id", flat=True).first()
        if claim.attempt_id is not None
        else None
    )
    traceparent, run_id = run.traceparent, run.id
    attributes = {
        "workflow": run.workflow,
        "run_id": str(run.id),
        "claim_key": claim.key,
        "outcome": str(claim.status),
        "actor": who,
    }
    transaction.on_commit(
        lambda: tracing.emit_resolution(
            traceparent=traceparent,
            run_id=run_id,
            attempt_span_id=attempt_span,
            start_ns=began,
            attributes=attributes,
        )
    )


def _refuse_resolved(claim_id: int) -> NoReturn:
    existing = Claim.objects.get(pk=claim_id)
    if existing.resolved_at is not None:
        raise ClaimAlreadyResolved(existing)
    raise ClaimNotUnresolved(existing)


def _step_resolved_succeeded(
    run: Run, step: Step, result: Any, who: str, *, run_goes_on: bool
) -> None:
    # Needed whether or not the run goes on: what follows, or, in a run that stopped,
    # whether the step names a compensation that must now undo it.
    workflow = workflow_of(
        run,
        doing="queue the steps that follow"
        if run_goes_on
        else "tell whether the step's compensation must run",
    )
    # The same bookkeeping as any success (succeed_step): the run's count of steps
    # remaining goes down whether or not it still goes on (a retry of its failed
    # steps then finds it right), and in a run that stopped nothing is queued, but a
    # compensation the step names is planned: its effect happened.
    ready = succeed_step(
        run.id, step, workflow, was=StepStatus.UNRESOLVED, result=result, resolved_by=who, error=""
    )
    publish_on_commit(ready)


def _step_resolved_failed(run: Run, step: Step, who: str, *, run_goes_on: bool) -> None:
    if run_goes_on and step.has_attempts_left:
        took = step_to_queued(
            run.id,
            step.id,
            step.key,
            was=StepStatus.UNRESOLVED,
            reason=f"claim resolved as failed by {who}; retrying",
            claim_generation=F("claim_generation") + 1,
        )
        assert took, "the caller holds the step's lock and saw it unresolved"
        publish_on_commit([step.id])
        return
    if run_goes_on:
        error = f"claim resolved as failed by {who} and no attempts remain"
    else:
        error = f"claim resolved as failed by {who}; the run no longer goes on ({run.status})"
    took = fail_step(run.id, step, error=error, was=StepStatus.UNRESOLVED)
    assert took, "the claim's resolution locked the step, unresolved"


def _resume_if_reconciled(run_id: uuid.UUID) -> None:
    """needs_reconciliation → running once no unresolved claim is left. Resolutions of
    one run serialize on its row (append_event), so the last one sees all the others."""
    unresolved = Claim.objects.filter(run_id=OuterRef("pk"), status=ClaimStatus.UNRESOLVED)
    if (
        Run.objects.filter(pk=run_id, status=RunStatus.NEEDS_RECONCILIATION)
        .filter(~Exists(unresolved))
        .update(status=RunStatus.RUNNING, updated_at=Now())
    ):
        events.append_event(run_id, events.RunResumed())
        # A step of another branch still waits for a signal or a time: so does the run.
        if (
            Run.objects.filter(pk=run_id, status=RunStatus.RUNNING)
            .filter(Exists(Step.objects.filter(run_id=OuterRef("pk"), status=StepStatus.WAITING)))
            .update(status=RunStatus.WAITING, updated_at=Now())
        ):
            events.append_event(run_id, events.RunWaiting(reason="a step still waits"))


# --- previews -------------------------------------------------------------------------
# Preview, its actions (RESUMES, RETRIES, …) and Resolution are data: runs/resolutions.py.
@dataclass
class _RunState:
    """A run as the previewed decisions leave it (several of them, in a bulk preview)."""

    status: str
    steps_remaining: int
    unresolved: int


@dataclass
class _Waiting:
    """A dependent step: its key, status and dependencies not yet succeeded."""

    key: str
    status: str
    pending_deps: int
    is_map: bool = False


@dataclass
class _PreviewState:
    runs: dict[uuid.UUID, _RunState] = field(default_factory=dict)
    dependents: dict[tuple[uuid.UUID, str], _Waiting] = field(default_factory=dict)
    decided: set[int] = field(default_factory=set)


def preview_resolution(*, claim_id: int, outcome: str) -> Preview:
    """What `resolve_claim(claim_id, outcome, ...)` would do now. Raises ClaimNotFound
    for an unknown id, InvalidResolution for an unknown outcome; writes nothing."""
    preview = preview_resolutions(claim_ids=[claim_id], outcome=outcome)[0]
    if preview.run_id is None:
        raise ClaimNotFound(f"no claim with id {claim_id}")
    return preview


def preview_resolutions(*, claim_ids: Sequence[int], outcome: str) -> list[Preview]:
    """Previews of resolving each claim, in order, with `outcome`: each as it would be
    after the decisions before it in the list (two claims of one run: the second sees
    the first applied), as a bulk decision applies them. Writes nothing, and reads
    from one snapshot in a constant number of queries."""
    validate_outcome(outcome)
    with snapshot():
        claims = Claim.objects.select_related("run", "step").in_bulk(list(claim_ids))
        state = _preview_state(list(claims.values()))
        return [
            _preview(claims[pk], outcome, state)
            if pk in claims
            else Preview(pk, outcome, REFUSED, Preview.Because.NO_CLAIM)
            for pk in claim_ids
        ]


def _preview_state(claims: list[Claim]) -> _PreviewState:
    state = _PreviewState()
    run_ids = {c.run_id for c in claims}
    unresolved = dict(
        Claim.objects.filter(run_id__in=run_ids, status=ClaimStatus.UNRESOLVED)
        .values("run_id")
        .annotate(n=Count("id"))
        .values_list("run_id", "n")
        .order_by()
    )
    for claim in claims:
        state.runs[claim.run_id] = _RunState(
            claim.run.status, claim.run.steps_remaining, unresolved.get(claim.run_id, 0)
        )
    wanted: dict[uuid.UUID, set[str]] = {}
    maps: set[tuple[uuid.UUID, str]] = set()
    for claim in claims:
        wf = registry.get(claim.run.workflow, claim.run.version)
        if wf is None or claim.step.parent_id is not None:
            continue
        for name in wf.dependents(claim.step.name):
            wanted.setdefault(claim.run_id, set()).add(name)
            if wf.steps[name].is_map:
                maps.add((claim.run_id, name))
    if wanted:
        rows = Step.objects.filter(
            run_id__in=list(wanted),
            name__in={name for names in wanted.values() for name in names},
            parent__isnull=True,
        ).values_list("run_id", "name", "key", "status", "pending_deps")
        for run_id, name, key, status, pending in rows:
            if name in wanted.get(run_id, ()):
                state.dependents[(run_id, name)] = _Waiting(
                    key, status, pending, (run_id, name) in maps
                )
    return state


def _preview(claim: Claim, outcome: str, state: _PreviewState) -> Preview:
    run, step = claim.run, claim.step
    current = state.runs[run.id]
    finished = current.status not in statuses_going_on(step)
    base = Preview(
        claim.id,
        outcome,
        action="",
        claim_key=claim.key,
        run_id=run.id,
        workflow=run.workflow,
        version=run.version,
        step=step.key,
        claim_status=claim.status,
        resolved_by=claim.resolved_by,
        resolved_at=claim.resolved_at,
        run_was=current.status,
        run_finished=finished,
    )
    if claim.id in state.decided:
        return replace(
            base,
            action=NOT_UNRESOLVED,
            because=Preview.Because.DECIDED_EARLIER,
            step_status=step.status,
            run_status=current.status,
        )
    if claim.status != ClaimStatus.UNRESOLVED:
        return replace(
            base,
            action=NOT_UNRESOLVED,
            because=Preview.Because.CLAIM_NOT_UNRESOLVED,
            step_status=step.status,
            run_status=current.status,
        )
    wf = registry.get(run.workflow, run.version)
    if outcome == ClaimStatus.SUCCEEDED and wf is None and step.status == StepStatus.UNRESOLVED:
        return replace(
            base,
            action=REFUSED,
            because=Preview.Because.WORKFLOW_UNKNOWN,
            step_status=step.status,
            run_status=current.status,
        )
    state.decided.add(claim.id)
    current.unresolved -= 1
    if step.status != StepStatus.UNRESOLVED:
        return replace(
            base,
            action=RECORDED_ONLY,
            because=Preview.Because.STEP_GOES_ON,
            step_status=step.status,
            run_status=current.status,
        )
    if finished and outcome == ClaimStatus.SUCCEEDED and wf is not None:
        undo = wf.steps[step.name].compensate if step.name in wf.steps else None
        if undo:
            return replace(
                base,
                action=COMPENSATES,
                compensation=undo,
                step_status=outcome,
                run_status=RunStatus.COMPENSATING,
            )
    if finished:
        return replace(
            base,
            action=RECORDED_ONLY,
            because=Preview.Because.RUN_FINISHED,
            step_status=outcome,
            run_status=current.status,
        )
    if outcome == ClaimStatus.SUCCEEDED:
        assert wf is not None
        return _preview_succeeded(base, claim, wf.dependents(step.name), state)
    return _preview_failed(base, claim, state)


def _resumed(base: Preview, current: _RunState) -> Preview:
    """needs_reconciliation → running once the decisions leave no unresolved claim."""
    if current.status == RunStatus.NEEDS_RECONCILIATION and current.unresolved == 0:
        current.status = RunStatus.RUNNING
        return replace(base, resumes=True)
    return replace(base, other_unresolved=max(current.unresolved, 0))


def _preview_succeeded(
    base: Preview, claim: Claim, dependents: list[str], state: _PreviewState
) -> Preview:
    step, current = claim.step, state.runs[claim.run_id]
    if step.parent_id is None:
        current.steps_remaining -= 1
    if step.parent_id is None and current.steps_remaining == 0:
        current.status = RunStatus.SUCCEEDED
        return replace(
            base,
            action=FINISHES_RUN,
            step_status=StepStatus.SUCCEEDED,
            run_status=RunStatus.SUCCEEDED,
        )
    ready: list[str] = []
    expands: list[str] = []
    waiting: list[str] = []
    for name in dependents:
        dependent = state.dependents.get((claim.run_id, name))
        if dependent is None:
            continue
        dependent.pending_deps -= 1
        if dependent.pending_deps > 0:
            waiting.append(dependent.key)
        elif dependent.status == StepStatus.PENDING:
            (expands if dependent.is_map else ready).append(dependent.key)
    resumed = _resumed(base, current)
    return replace(
        resumed,
        action=RESUMES,
        step_status=StepStatus.SUCCEEDED,
        run_status=current.status,
        ready=tuple(ready),
        expands=tuple(expands),
        waiting=tuple(waiting),
    )


def _preview_failed(base: Preview, claim: Claim, state: _PreviewState) -> Preview:
    step, current = claim.step, state.runs[claim.run_id]
    if step.has_attempts_left:
        resumed = _resumed(base, current)
        return replace(
            resumed,
            action=RETRIES,
            step_status=StepStatus.QUEUED,
            run_status=current.status,
            attempt=step.counted_attempts + 1,
            max_attempts=step.max_attempts,
            next_claim_key=keys.retry_key(claim.key, step.claim_generation),
        )
    current.status = RunStatus.FAILED
    return replace(
        base,
        action=FAILS_RUN,
        step_status=StepStatus.FAILED,
        run_status=RunStatus.FAILED,
        max_attempts=step.max_attempts,
        attempts_used=step.counted_attempts,
    )


__all__ = [
    "COMPENSATES",
    "FAILS_RUN",
    "FINISHES_RUN",
    "NOT_UNRESOLVED",
    "RECORDED_ONLY",
    "REFUSED",
    "RESUMES",
    "RETRIES",
    "Preview",
    "Resolution",
    "claim_resolved",
    "preview_resolution",
    "preview_resolutions",
    "resolve_claim",
    "validate_outcome",
    "validate_resolution",
]
