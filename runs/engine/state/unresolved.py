"""Claims closing: failed or abandoned when a step gives up, unresolved when its
effect's outcome is unknown (then the run waits for a resolution, and the step's
probe, if it has one, is asked first)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.db.models import Expression
from django.db.models.functions import Now

from runs import sql
from runs.engine.core.publish import publish_probes
from runs.engine.core.versions import workflow_of
from runs.models import Claim, Run, Step
from runs.record import events
from runs.states import ClaimStatus, EffectKind, RunStatus
from runs.workflows import registry
from runs.workflows.definition import StepDef

SQL = sql.load(__file__)


def _close_in_flight_claims(
    *,
    run_id: uuid.UUID,
    step: Step,
    status: ClaimStatus,
    event: Callable[[str], events.Event],
    error: str,
    attempt_number: int | None = None,
    closing: tuple[ClaimStatus, ...] = (ClaimStatus.IN_FLIGHT,),
) -> None:
    """Move the step's claims in `closing` (in flight, by default) to `status` (failed:
    done; unresolved: waiting for a resolution), with one event each: `event(key)`."""
    fields: dict[str, Any] = {"status": status, "error": error}
    if status == ClaimStatus.UNRESOLVED:
        fields["unresolved_at"] = Now()
    else:
        fields["completed_at"] = Now()
    claims = list(Claim.objects.filter(step=step, status__in=closing).values_list("id", "key"))
    Claim.objects.filter(pk__in=[pk for pk, _ in claims], status__in=closing).update(**fields)
    for _, key in claims:
        events.append_event(run_id, event(key), step_id=step.id, attempt_number=attempt_number)


def close_claims_on_give_up(
    *, run_id: uuid.UUID, step: Step, error: str, maybe_applied: bool
) -> None:
    """A step failed for good: close its in-flight claims. `failed` means the effect
    did not happen; an idempotent effect that may have happened is `abandoned` (its
    outcome is unknown, and a retry with the same key is safe)."""
    event: type[events.ClaimAbandoned | events.ClaimFailed]
    if maybe_applied and step.kind == EffectKind.IDEMPOTENT:
        status, event = ClaimStatus.ABANDONED, events.ClaimAbandoned
    else:
        status, event = ClaimStatus.FAILED, events.ClaimFailed
    _close_in_flight_claims(
        run_id=run_id, step=step, status=status, event=lambda key: event(key=key), error=error
    )


def mark_unresolved(
    *,
    run_id: uuid.UUID,
    step: Step,
    attempt_number: int,
    reason: str,
    probe_after: Expression | Any,
    closing: tuple[ClaimStatus, ...] = (ClaimStatus.IN_FLIGHT,),
) -> None:
    """The step's in-flight claim becomes unresolved and the run waits for a human (or
    its probe, which runs no earlier than `probe_after`, on the database's clock).
    `closing` adds the claim statuses that go with it (an abandoned claim, for a
    compensable effect of unknown outcome in a run that stopped: state/stopped.py)."""
    _close_in_flight_claims(
        run_id=run_id,
        step=step,
        status=ClaimStatus.UNRESOLVED,
        event=lambda key: events.ClaimUnresolved(key=key, reason=reason),
        error=reason,
        attempt_number=attempt_number,
        closing=closing,
    )
    events.append_event(
        run_id,
        events.StepUnresolved(step=step.key, reason=reason),
        step_id=step.id,
        attempt_number=attempt_number,
    )
    if Run.objects.filter(pk=run_id, status__in=[RunStatus.RUNNING, RunStatus.WAITING]).update(
        status=RunStatus.NEEDS_RECONCILIATION, updated_at=Now()
    ):
        events.append_event(run_id, events.RunNeedsReconciliation(step=step.key))
    request_probes(run_id=run_id, step=step, probe_after=probe_after)


def probe_of(run: Run, step: Step) -> StepDef | None:
    """The step's definition if it declares a probe, else None (also when this
    process lacks the run's version): a registry lookup, no query, raises nothing."""
    wf = registry.get(run.workflow, run.version)
    stepdef = wf.stepdef(step.name) if wf else None
    return stepdef if stepdef is not None and stepdef.probe is not None else None


def request_probes(*, run_id: uuid.UUID, step: Step, probe_after: Any) -> None:
    """Called in the transaction that made the step's claims unresolved: if the step
    has a probe, mark its claims and send a probe message after commit, due at
    `probe_after` (a database time or expression)."""
    run = Run.objects.only("workflow", "version").get(pk=run_id)
    # Whether the step has a probe is the definition's: a process without it refuses
    # (the sweeper then leaves the crash to a worker that knows the version).
    stepdef = workflow_of(run, doing="tell whether the step has a probe").stepdef(step.name)
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
        events.append_event(run.id, events.ProbeRequested(claim_id=claim_id), step_id=step.id)
    delays = seconds_until_probe(ids)
    transaction.on_commit(lambda: publish_probes(ids, delays))


def seconds_until_probe(claim_ids: list[int]) -> dict[int, float]:
    """For each claim, how long until its probe is due, on the database's clock."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["seconds_until_probe"], {"claims": claim_ids})
        return {int(pk): float(delay) for pk, delay in cursor.fetchall()}
