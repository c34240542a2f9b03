"""Recovery (DESIGN.md §7): attempts whose lease expired are declared crashed and their
steps handled by effect kind; queued steps whose message never started an attempt are
republished.

Rows are taken with `SELECT … FOR UPDATE SKIP LOCKED`, so several sweepers and
workers can run at once: a row locked by a finishing attempt (or another sweeper) is
simply left for the next sweep.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now

from runs import events
from runs.models import Attempt, Claim, Step
from runs.states import RUN_ACTIVE, AttemptStatus, ClaimStatus, EffectKind, StepStatus

from .complete import fail_run, fail_step_claims, mark_unresolved
from .dispatch import publish_on_commit

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    crashed: list[int] = field(default_factory=list)
    republished: list[int] = field(default_factory=list)
    probes: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{len(self.crashed)} crashed attempt(s), {len(self.republished)} republished "
            f"step(s), {len(self.probes)} republished probe(s)"
        )


def sweep(*, limit: int = 200) -> SweepReport:
    report = SweepReport()
    with transaction.atomic():
        expired = list(
            Attempt.objects.select_for_update(skip_locked=True)
            .filter(status=AttemptStatus.RUNNING, lease_expires_at__lt=Now())
            .order_by("lease_expires_at")[:limit]
        )
        for attempt in expired:
            _crash(attempt)
            report.crashed.append(attempt.id)
    report.republished = republish_stale(limit=limit)
    report.probes = republish_probes(limit=limit)
    if report.crashed or report.republished or report.probes:
        log.info("recovery sweep: %s", report)
    return report


def recover_attempt(*, attempt_id: int) -> bool:
    """Declare one attempt crashed if its lease expired (a redelivered message taking
    over). False if the attempt is alive or another process holds it."""
    with transaction.atomic():
        attempt = (
            Attempt.objects.select_for_update(skip_locked=True)
            .filter(pk=attempt_id, status=AttemptStatus.RUNNING, lease_expires_at__lt=Now())
            .first()
        )
        if attempt is None:
            return False
        _crash(attempt)
        return True


def _crash(attempt: Attempt) -> None:
    """Mark the attempt crashed and apply the effect-kind table of DESIGN.md §3.
    Caller holds the attempt's row lock."""
    step = Step.objects.select_for_update().get(pk=attempt.step_id)
    Attempt.objects.filter(pk=attempt.id, status=AttemptStatus.RUNNING).update(
        status=AttemptStatus.CRASHED, finished_at=Now(), error="lease expired"
    )
    events.append_event(
        step.run_id,
        events.ATTEMPT_CRASHED,
        step_id=step.id,
        attempt_number=attempt.number,
        step=step.key,
        worker=attempt.worker,
    )
    if step.status != StepStatus.RUNNING or step.current_attempt_id != attempt.id:
        return
    owned = Step.objects.filter(pk=step.id, status=StepStatus.RUNNING, current_attempt=attempt)
    if step.kind == EffectKind.GUARDED and step.parent_id is None:
        # The effect may or may not have happened: never guess.
        owned.update(
            status=StepStatus.UNRESOLVED,
            current_attempt=None,
            error="worker died during a guarded effect",
        )
        mark_unresolved(
            run_id=step.run_id,
            step=step,
            attempt_number=attempt.number,
            reason=f"worker {attempt.worker or '?'} died (lease expired)",
        )
        return
    if step.attempts < step.max_attempts:
        owned.update(status=StepStatus.QUEUED, current_attempt=None, queued_at=Now())
        events.append_event(
            step.run_id,
            events.STEP_QUEUED,
            step_id=step.id,
            step=step.key,
            reason="attempt crashed",
        )
        publish_on_commit([step.id])
        return
    error = f"attempt {attempt.number} crashed and no attempts remain"
    owned.update(status=StepStatus.FAILED, current_attempt=None, error=error, finished_at=Now())
    fail_step_claims(run_id=step.run_id, step=step, error=error)
    events.append_event(
        step.run_id,
        events.STEP_FAILED,
        step_id=step.id,
        attempt_number=attempt.number,
        step=step.key,
        error=error,
    )
    fail_run(step.run_id, f"step {step.key} failed: {error}")


def republish_stale(*, limit: int = 200) -> list[int]:
    """Republish steps that are ready but have not started within the bound: their
    message was lost (broker restart, a worker killed between commit and publish).
    A duplicate of a message that was merely slow is harmless."""
    bound = timedelta(seconds=settings.RUNS_REPUBLISH_AFTER_SECONDS)
    with transaction.atomic():
        stale = list(
            Step.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(run__status__in=RUN_ACTIVE)
            .filter(
                Q(status=StepStatus.QUEUED, queued_at__lt=Now() - bound)
                | Q(status=StepStatus.RETRYING, next_attempt_at__lt=Now() - bound)
            )
            .order_by("queued_at")
            .values_list("id", flat=True)[:limit]
        )
        if stale:
            Step.objects.filter(pk__in=stale, status=StepStatus.QUEUED).update(queued_at=Now())
            Step.objects.filter(pk__in=stale, status=StepStatus.RETRYING).update(
                next_attempt_at=Now()
            )
            publish_on_commit(stale)
    return stale


def republish_probes(*, limit: int = 200) -> list[int]:
    """Probes requested but never run (message lost, worker died before the
    compare-and-set): send them again."""
    from .probe import publish_probes

    bound = timedelta(seconds=settings.RUNS_REPUBLISH_AFTER_SECONDS)
    with transaction.atomic():
        stale = list(
            Claim.objects.select_for_update(skip_locked=True)
            .filter(
                status=ClaimStatus.UNRESOLVED,
                probed_at__isnull=True,
                probe_requested_at__lt=Now() - bound,
            )
            .values_list("id", flat=True)[:limit]
        )
        if stale:
            Claim.objects.filter(pk__in=stale).update(probe_requested_at=Now())
            transaction.on_commit(lambda: publish_probes(stale))
    return stale


__all__ = ["SweepReport", "recover_attempt", "republish_probes", "republish_stale", "sweep"]
