"""execute_step(): the body of the Celery task. Start an attempt, run the effect as its
kind requires, finish or fail it. Nothing here decides state on its own: every
decision is a fenced, conditional write in start.py, complete.py or mapping.py."""

from __future__ import annotations

import logging
import traceback
import uuid
from typing import Any

from django.db import transaction

from runs import events
from runs.models import Claim, Step
from runs.states import ClaimStatus, EffectKind
from runs.workflows.definition import Context, NotApplied, StepDef

from . import faults
from .complete import ensure_json, fail_attempt, finish_attempt, renew_lease
from .errors import AttemptFenced
from .mapping import run_batch
from .start import Started, start_attempt

log = logging.getLogger(__name__)


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def dependency_results(run_id: uuid.UUID, stepdef: StepDef) -> dict[str, Any]:
    """What ctx.results holds: the results of the step's dependencies, by name."""
    return dict(
        Step.objects.filter(run_id=run_id, name__in=stepdef.after, parent__isnull=True).values_list(
            "name", "result"
        )
    )


def _context_factory(started: Started) -> Any:
    run, step, stepdef = started.run, started.step, started.stepdef
    results = dependency_results(run.id, stepdef)

    def heartbeat() -> None:
        renew_lease(started.attempt.id, started.lease_seconds)

    def make(*, item: Any = None, item_key: str | None = None, key: str | None = None) -> Context:
        return Context(
            run_id=str(run.id),
            step_name=step.name,
            input=dict(run.input),
            results=results,
            idempotency_key=key,
            attempt=started.attempt.number,
            heartbeat=heartbeat,
            item=item,
            item_key=item_key,
        )

    return make


def execute_step(*, step_id: int, worker: str) -> str:
    """Run one attempt of a step; return a word saying how it ended (for logs)."""
    started = start_attempt(step_id=step_id, worker=worker)
    if started is None:
        return "skipped"
    step, stepdef = started.step, started.stepdef
    make_context = _context_factory(started)
    late_evidence: dict[str, Any] = {}
    if step.parent_id is None and step.kind != EffectKind.TRANSACTIONAL:
        faults.hit("after_claim", step.name)
    try:
        if started.is_batch:
            counts = run_batch(started, make_context)
            finish_attempt(started, result=counts, batch_counts=counts)
        elif step.kind == EffectKind.TRANSACTIONAL:
            ctx = make_context(key=_key(started))
            faults.hit("before_claim", step.name)
            finish_attempt(started, effect=lambda: _checked(started, stepdef.fn(ctx)))
        else:
            ctx = make_context(key=started.claim.key if started.claim else None)
            result = stepdef.fn(ctx)
            late_evidence = {"late_result": result}
            result = _checked(started, result)
            faults.hit("after_effect", step.name)
            finish_attempt(started, result=result)
        return "succeeded"
    except AttemptFenced as exc:
        log.warning("late finish of step %s ignored: %s", step.key, exc)
        _keep_late_evidence(started, late_evidence)
        return "fenced"
    except NotApplied as exc:
        return _fail(started, exc, uncertain=False)
    except Exception as exc:
        log.warning("step %s attempt %s raised %s", step.key, started.attempt.number, exc)
        return _fail(started, exc, uncertain=True)


def _keep_late_evidence(started: Started, evidence: dict[str, Any]) -> None:
    """A guarded attempt that lost its lease (a paused "zombie") may still have done
    its effect: its late result is never applied, but is kept on the claim, which the
    sweeper made unresolved, as evidence for the operator (DESIGN.md §7)."""
    claim = started.claim
    if claim is None or started.step.kind != EffectKind.GUARDED or not evidence:
        return
    evidence = {**evidence, "late_attempt": started.attempt.number}
    try:
        evidence = ensure_json(evidence)
    except TypeError:
        evidence = {key: repr(value) for key, value in evidence.items()}
    with transaction.atomic():
        row = (
            Claim.objects.select_for_update()
            .filter(pk=claim.id, status=ClaimStatus.UNRESOLVED)
            .first()
        )
        if row is None:
            return
        Claim.objects.filter(pk=row.pk).update(evidence={**(row.evidence or {}), **evidence})
        events.append_event(
            started.run.id,
            events.CLAIM_EVIDENCE,
            step_id=started.step.id,
            attempt_number=started.attempt.number,
            key=claim.key,
            evidence=evidence,
        )


def _key(started: Started) -> str:
    from .start import step_claim_key

    return step_claim_key(started.run, started.step, started.stepdef)


def _checked(started: Started, result: Any) -> Any:
    """Apply the step's postcondition; a failed one is an error (escalated for a
    guarded step, retried otherwise)."""
    verify = started.stepdef.verify
    if verify is not None and not verify(result):
        raise PostconditionFailed(f"verify() rejected the result of {started.step.key}: {result!r}")
    return result


class PostconditionFailed(Exception):
    pass


def _fail(started: Started, exc: BaseException, *, uncertain: bool) -> str:
    try:
        return fail_attempt(started, error=_describe(exc), uncertain=uncertain)
    except AttemptFenced as fenced:
        log.warning("late failure of step %s ignored: %s", started.step.key, fenced)
        _keep_late_evidence(started, {"late_error": _describe(exc)})
        return "fenced"
