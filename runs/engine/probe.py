"""Probing unresolved claims (DESIGN.md §3).

When a guarded step's claim becomes unresolved and the step declares `probe(ctx)`, a
worker asks the external system, read-only, what happened. A definite answer resolves
the claim through the same service an operator uses (actor `probe`, evidence
recorded); an unknown answer, or a probe that raises, leaves it for the operator.

A probe runs no earlier than the claim's `probe_after`: for a crashed attempt, its
lease plus RUNS_PROBE_GRACE_SECONDS. Its worker may only be paused (GC, a frozen VM)
between its last lease check and the external call; asking the external system too
early could answer `not_applied`, retry the effect, and then see the paused original
land it too. A probe message that arrives early (Celery's countdown runs on the
worker's clock) is sent again with the delay that remains on the database's clock.
"""

from __future__ import annotations

import logging
import traceback
import uuid
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.db.models.functions import Now

from runs import events
from runs.models import Claim, Run, Step
from runs.states import ClaimStatus
from runs.workflows import registry
from runs.workflows.definition import Context, ProbeResult

from .execute import dependency_results
from .resolve import ResolutionError, resolve_claim

log = logging.getLogger(__name__)

PROBE_ACTOR = "probe"


def request_probes(*, run_id: uuid.UUID, step: Step, probe_after: Any) -> None:
    """Called in the transaction that made the step's claims unresolved: if the step
    has a probe, mark its claims and send a probe message after commit, due at
    `probe_after` (a database time or expression)."""
    run = Run.objects.only("workflow", "version").get(pk=run_id)
    wf = registry.get(run.workflow, run.version)
    stepdef = wf.steps.get(step.name) if wf else None
    if stepdef is None or stepdef.probe is None:
        return
    ids = list(
        Claim.objects.filter(
            step=step, status=ClaimStatus.UNRESOLVED, probed_at__isnull=True
        ).values_list("id", flat=True)
    )
    if not ids:
        return
    Claim.objects.filter(pk__in=ids).update(probe_requested_at=Now(), probe_after=probe_after)
    for claim_id in ids:
        events.append_event(run.id, events.PROBE_REQUESTED, step_id=step.id, claim_id=claim_id)
    delays = seconds_until_probe(ids)
    transaction.on_commit(lambda: publish_probes(ids, delays))


def seconds_until_probe(claim_ids: list[int]) -> dict[int, float]:
    """For each claim, how long until its probe is due, on the database's clock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, GREATEST(0, EXTRACT(EPOCH FROM probe_after - now()))::float "
            "FROM runs_claim WHERE id = ANY(%s) AND probe_after IS NOT NULL",
            [claim_ids],
        )
        return {int(pk): float(delay) for pk, delay in cursor.fetchall()}


def publish_probes(claim_ids: list[int], delays: dict[int, float] | None = None) -> None:
    from runs.tasks import probe_claim

    for claim_id in claim_ids:
        delay = (delays or {}).get(claim_id) or None
        try:
            probe_claim.apply_async((claim_id,), countdown=delay)
        except Exception:
            log.exception("could not publish probe of claim %s; the sweeper will retry", claim_id)


def probe_claim(*, claim_id: int) -> str:
    claim = Claim.objects.select_related("run", "step").filter(pk=claim_id).first()
    if claim is None or claim.status != ClaimStatus.UNRESOLVED:
        return "skipped"
    run, step = claim.run, claim.step
    wf = registry.get(run.workflow, run.version)
    stepdef = wf.steps.get(step.name) if wf else None
    if stepdef is None or stepdef.probe is None:
        return "skipped"
    # Compare-and-set: one probe per claim, even if its message is delivered twice,
    # and none before it is due.
    due = Q(probe_after__isnull=True) | Q(probe_after__lte=Now())
    if not Claim.objects.filter(
        due, pk=claim_id, status=ClaimStatus.UNRESOLVED, probed_at__isnull=True
    ).update(probed_at=Now()):
        early = seconds_until_probe([claim_id]).get(claim_id, 0.0)
        if early > 0 and claim.probed_at is None:
            publish_probes([claim_id], {claim_id: early})
            return "early"
        return "skipped"
    ctx = Context(
        run_id=str(run.id),
        step_name=step.name,
        input=dict(run.input),
        results=dependency_results(run.id, stepdef),
        idempotency_key=claim.key,
        attempt=step.attempts,
        heartbeat=lambda: None,
    )
    try:
        found = stepdef.probe(ctx)
        if not isinstance(found, ProbeResult):
            raise TypeError(f"probe returned {type(found).__name__}, not a ProbeResult")
    except Exception as exc:
        found = ProbeResult.unknown(
            "probe raised", error="".join(traceback.format_exception_only(type(exc), exc)).strip()
        )
    if found.outcome in ("applied", "not_applied"):
        outcome = ClaimStatus.SUCCEEDED if found.outcome == "applied" else ClaimStatus.FAILED
        try:
            resolve_claim(
                claim_id,
                outcome,
                actor=PROBE_ACTOR,
                note=f"probe found the effect {found.outcome.replace('_', ' ')}",
                result=found.result if outcome == ClaimStatus.SUCCEEDED else None,
                evidence=found.evidence,
            )
        except ResolutionError as exc:  # an operator was faster: theirs stands
            log.info("probe of claim %s not applied: %s", claim_id, exc)
            return "superseded"
        return found.outcome
    with transaction.atomic():
        events.append_event(
            run.id,
            events.PROBE_INCONCLUSIVE,
            step_id=step.id,
            key=claim.key,
            evidence=found.evidence,
        )
    return "unknown"
