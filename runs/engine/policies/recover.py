"""Recovery (docs/architecture.md#recovery): attempts whose lease expired are declared crashed
and their
steps handled by effect kind; queued steps whose message never started an attempt are
republished (once per bound, not while the broker's queue holds their messages), and
so are probes whose message was lost or whose probe lease passed
without an answer.

Each expired attempt is crashed in its own short transaction, taken with
`SELECT … FOR UPDATE SKIP LOCKED`: several sweepers and workers can run at once, a row
locked by a finishing attempt (or another sweeper) is left for the next sweep, and no
sweep ever holds the rows of two runs at once (so two sweeps cannot deadlock).

A worker can also crash its own attempt: a finish that lost its fence (the lease
expired before it could commit) settles the attempt as the sweeper would, and keeps
what it knows (its result, its error, or that it never called the effect) as evidence.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery
from django.db.models.functions import Now

from runs.engine.attempts.slots import republish_waiting
from runs.engine.attempts.start import Started
from runs.engine.core.clock import timeout_for
from runs.engine.core.jsonvalues import ensure_json
from runs.engine.core.locks import lock_run
from runs.engine.core.publish import publish_on_commit, publish_probes, step_queue_depth
from runs.engine.state.run import active_run, compensating_run, fail_step, statuses_going_on
from runs.engine.state.steps import step_to_queued
from runs.engine.state.unresolved import mark_unresolved
from runs.errors import WorkflowVersionUnknown
from runs.models import Attempt, Claim, Pause, Run, Step
from runs.ops import metrics, tracing
from runs.ops.logcontext import payload
from runs.record import events
from runs.states import AttemptStatus, ClaimStatus, EffectKind, StepStatus
from runs.workflows import StepDef, registry

from . import breaker
from .deadlines import end_past_deadlines
from .probe import give_up_probe
from .waits import wait_step, wake_due

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    crashed: list[int] = field(default_factory=list)
    republished: list[int] = field(default_factory=list)
    probes: list[int] = field(default_factory=list)
    probes_given_up: list[int] = field(default_factory=list)  # claims left to the operator
    woken: list[int] = field(default_factory=list)  # waiting steps whose time came
    # steps waiting for a slot or a hold sent because one is free (attempts/slots.py)
    handed_over: list[int] = field(default_factory=list)
    # runs ended at their deadline (policies/deadlines.py)
    past_deadline: list[uuid.UUID] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{len(self.crashed)} crashed attempt(s), {len(self.republished)} republished "
            f"step(s), {len(self.probes)} republished probe(s), "
            f"{len(self.probes_given_up)} probe(s) given up, {len(self.woken)} woken timer(s), "
            f"{len(self.handed_over)} step(s) sent a freed slot, "
            f"{len(self.past_deadline)} run(s) ended at their deadline"
        )


def swept_runs(run_id_field: str) -> Q:
    """What a sweep of this process may touch, by the run id at `run_id_field`: the runs
    settings.RUNS_SWEEP_ONLY_RUNS lists, when it lists any (the processes of `manage.py
    demo`, which must never crash, probe, republish or wake another run, with timings
    of their own), else every run."""
    only = settings.RUNS_SWEEP_ONLY_RUNS
    return Q(**{f"{run_id_field}__in": only}) if only else Q()


def sweep(*, limit: int = 200) -> SweepReport:
    """Crash up to `limit` expired attempts, end runs past their deadline, republish
    lost step and probe messages, wake waits whose time came. Returns a SweepReport of
    what it did, each crash and each run's end in a transaction of its own."""
    report = SweepReport()
    tried: set[int] = set()
    while len(report.crashed) < limit:
        # Candidates are read without locks; each is then taken (or skipped, if another
        # sweeper or a finishing worker holds it) in its own transaction.
        candidates = list(
            Attempt.objects.filter(status=AttemptStatus.RUNNING, lease_expires_at__lt=Now())
            .filter(swept_runs("step__run_id"))
            .exclude(pk__in=tried)
            .order_by("lease_expires_at")
            .values_list("id", flat=True)[: limit - len(report.crashed)]
        )
        if not candidates:
            break
        for attempt_id in candidates:
            tried.add(attempt_id)
            if recover_attempt(attempt_id=attempt_id):
                report.crashed.append(attempt_id)
    # Before the republish: a step of a run past its deadline will not start, and the
    # run's end withdraws it instead of a message being sent for it again.
    report.past_deadline = end_past_deadlines(limit=limit, only=swept_runs("id"))
    report.woken = wake_due(limit=limit, only=swept_runs("run_id"))
    report.republished = republish_stale(limit=limit)
    if not settings.RUNS_SWEEP_ONLY_RUNS:  # the demo's processes declare no limit
        # After the crashes above: a crashed attempt's slot is free now.
        report.handed_over = republish_waiting(limit=limit)
    report.probes = republish_probes(limit=limit)
    report.probes_given_up = give_up_probes(limit=limit)
    if (
        report.crashed
        or report.republished
        or report.probes
        or report.probes_given_up
        or report.woken
        or report.handed_over
        or report.past_deadline
    ):
        log.info("recovery sweep: %s", report)
    return report


def recover_attempt(*, attempt_id: int) -> bool:
    """Declare one attempt crashed if its lease expired, in its own transaction. False
    if the attempt is alive, already finished, or another process holds it, or if what
    follows the crash needs the run's workflow version and this process lacks it (which
    steps to compensate, whether a probe is asked): the transaction rolls back and a
    worker that knows the version crashes it (docs/reliability.md#version-skew)."""
    try:
        return _recover_attempt(attempt_id)
    except WorkflowVersionUnknown as refused:
        log.info("expired attempt %s left to a worker that knows it: %s", attempt_id, refused)
        return False


def _recover_attempt(attempt_id: int) -> bool:
    with transaction.atomic():
        # Only the attempt's own row (`of=self`), by primary key: no join, no ordering.
        attempt = (
            Attempt.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(pk=attempt_id, status=AttemptStatus.RUNNING, lease_expires_at__lt=Now())
            .order_by()
            .first()
        )
        if attempt is None:
            return False
        _crash(attempt)
        labels = (
            Step.objects.filter(pk=attempt.step_id).values_list("run__workflow", "kind").first()
        )
        workflow, kind = labels or ("?", "?")
        metrics.on_commit(lambda: metrics.RECOVERED.labels(workflow, kind).inc())
        return True


def _labels(step: Step) -> tuple[str, str]:
    workflow = Run.objects.filter(pk=step.run_id).values_list("workflow", flat=True).first()
    return workflow or "?", str(step.kind)


def _probe_after(attempt: Attempt) -> Any:
    """A crashed guarded attempt's worker may only be paused: probe no earlier than its
    lease plus a grace period (both on the database's clock)."""
    return attempt.lease_expires_at + timedelta(seconds=float(settings.RUNS_PROBE_GRACE_SECONDS))


def _stepdef(run: Run | None, step: Step) -> StepDef | None:
    """The step's definition, if this worker knows the run's workflow version."""
    wf = registry.get(run.workflow, run.version) if run is not None else None
    return wf.stepdef(step.name) if wf is not None else None


def _ran_past_timeout(run: Run | None, step: Step, attempt: Attempt) -> float | None:
    """The step's timeout if the attempt's lease ran to it (the attempt was alive at its
    timeout and did not stop: core/timeouts.py replaced its process, or could not), else
    None. A workflow this worker does not know has no timeout to tell."""
    stepdef = _stepdef(run, step)
    if stepdef is None or attempt.started_at is None:
        return None
    seconds = timeout_for(stepdef)
    if attempt.lease_expires_at >= attempt.started_at + timedelta(seconds=seconds):
        return seconds
    return None


def _crash(attempt: Attempt, *, effect_started: bool = True) -> None:
    """Mark the attempt crashed and apply the effect-kind table of
    docs/architecture.md#effect-kinds.
    Caller holds the attempt's row lock.

    `effect_started=False`: the attempt itself knows it never called the step's
    function (it lost its lease just before), so even a guarded step is safe to retry.
    A guarded attempt that never recorded entering its effect (effect_entered_at, set
    by the lease check just before the call) did not call it either: the row says so,
    and that check can no longer succeed once the attempt is crashed here."""
    step = Step.objects.select_for_update().get(pk=attempt.step_id)
    # The run FOR UPDATE (lock_run), the strength the decision below needs, before the
    # first write that touches its row (the event's seq, the run's status): a start of
    # another step holds the run FOR KEY SHARE until it writes its own events, and a
    # crash that first took the row weaker would wait for that start while the start's
    # events waited for it (docs/architecture.md, "Locks").
    run = lock_run(step.run_id)
    if step.kind == EffectKind.GUARDED and attempt.effect_entered_at is None:
        effect_started = False
    reason = "lease expired" if effect_started else "lease expired before the effect was called"
    timed_out = _ran_past_timeout(run, step, attempt)
    if timed_out is not None:
        reason = f"timed out after {timed_out:g} s; its call did not stop, so its worker ended"
    n = Attempt.objects.filter(pk=attempt.id, status=AttemptStatus.RUNNING).update(
        status=AttemptStatus.CRASHED, finished_at=Now(), error=reason
    )
    assert n == 1, "caller holds the attempt's lock and saw it running"
    events.append_event(
        step.run_id,
        events.AttemptCrashed(step=step.key, worker=attempt.worker),
        step_id=step.id,
        attempt_number=attempt.number,
    )
    if timed_out is not None:
        events.append_event(
            step.run_id,
            events.AttemptTimedOut(step=step.key, seconds=timed_out, replaced=True),
            step_id=step.id,
            attempt_number=attempt.number,
        )
    workflow, kind = _labels(step)
    metrics.on_commit(lambda: metrics.STEPS.labels(workflow, kind, "crashed").inc())
    # A crash (a timeout whose call did not stop included) is an outcome the step's
    # breaker counts, after this commit.
    breaker.after_outcome(workflow, _stepdef(run, step))
    owns = step.status == StepStatus.RUNNING and step.current_attempt_id == attempt.id
    unknown = owns and step.kind == EffectKind.GUARDED and step.parent_id is None
    if attempt.span_id is not None:
        _emit_crash_span(attempt, step, run, "unknown" if unknown and effect_started else "crashed")
    if not owns:
        return
    owned = Step.objects.filter(pk=step.id, status=StepStatus.RUNNING, current_attempt=attempt)
    if unknown and effect_started:
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
            reason=reason
            if timed_out is not None
            else f"worker {attempt.worker or '?'} died (lease expired)",
            probe_after=_probe_after(attempt),
        )
        return
    # The run as it is now, under its lock (taken above): a retry or cancel that
    # committed meanwhile is seen, and none commits between this decision and its writes.
    active = run is not None and run.status in statuses_going_on(step)
    if step.has_attempts_left and active:
        took = step_to_queued(
            step.run_id,
            step.id,
            step.key,
            was=StepStatus.RUNNING,
            only_if=Q(current_attempt=attempt),
            reason="attempt timed out" if timed_out is not None else "attempt crashed",
            current_attempt=None,
        )
        assert took, "caller holds the step's lock and saw it running this attempt"
        publish_on_commit([step.id])
        return
    if step.has_attempts_left:  # but the run was cancelled (or failed) meanwhile
        error = f"attempt {attempt.number} crashed; the run is no longer active"
    else:
        error = f"attempt {attempt.number} crashed and no attempts remain"
    took = fail_step(
        step.run_id,
        step,
        error=error,
        was=StepStatus.RUNNING,
        owned_by=attempt,
        attempt_number=attempt.number,
        maybe_applied=effect_started,
        current_attempt=None,
    )
    assert took, "the step was read under its lock, running this attempt"


def _emit_crash_span(attempt: Attempt, step: Step, run: Run | None, outcome: str) -> None:
    """The span the crashed attempt's worker never ended, with the id its start wrote,
    once this crash commits (runs/ops/tracing.py)."""
    assert attempt.span_id is not None
    span_id, started_at = attempt.span_id, attempt.started_at
    # By its step (claim_step_status_idx; attempt_id has no index): the step's own claim,
    # not a map item's.
    key = (
        Claim.objects.filter(step_id=step.id, attempt_id=attempt.id, item_key__isnull=True)
        .values_list("key", flat=True)
        .first()
    )
    traceparent = run.traceparent if run is not None else ""
    workflow = run.workflow if run is not None else "?"
    attributes = {
        "run_id": str(step.run_id),
        "step": step.key,
        "attempt": attempt.number,
        "effect_kind": str(step.kind),
        "claim_key": key or "",
        "worker": attempt.worker,
    }
    transaction.on_commit(
        lambda: tracing.emit_attempt(
            traceparent=traceparent,
            run_id=step.run_id,
            span_id=span_id,
            started_at=started_at,
            workflow=workflow,
            step_name=step.name,
            attributes=attributes,
            outcome=outcome,
        )
    )


def settle_late_finish(
    started: Started, evidence: dict[str, Any], *, effect_started: bool = True
) -> None:
    """A finish (or failure) that lost its fence, in one transaction: crash the attempt
    if no one has yet (as the sweeper would, by effect kind), then keep what the
    attempt knows about a guarded effect as evidence on its claim, so the operator (or
    the probe) decides with it. A claim already resolved is final: the disagreement
    becomes a `late_result_after_resolution` event for the reconciliation pages."""
    with transaction.atomic():
        attempt = (
            Attempt.objects.select_for_update(of=("self",))
            .filter(pk=started.attempt.id, status=AttemptStatus.RUNNING, lease_expires_at__lt=Now())
            .order_by()
            .first()
        )
        if attempt is not None:
            _crash(attempt, effect_started=effect_started)
        claim = started.claim
        if claim is None or started.step.kind != EffectKind.GUARDED or not evidence:
            return
        _attach_evidence(started, claim.id, {**evidence, "late_attempt": started.attempt.number})


def _attach_evidence(started: Started, claim_id: int, evidence: dict[str, Any]) -> None:
    try:
        evidence = ensure_json(evidence, "evidence")
    except TypeError:
        evidence = {key: repr(value) for key, value in evidence.items()}
    lock_run(started.run.id)  # the run before its claims (locks.py)
    row = Claim.objects.select_for_update().filter(pk=claim_id).first()
    if row is None:
        return
    step_id, attempt_number = started.step.id, started.attempt.number
    if row.status == ClaimStatus.UNRESOLVED:
        Claim.objects.filter(pk=row.pk).update(evidence={**(row.evidence or {}), **evidence})
        events.append_event(
            started.run.id,
            events.ClaimEvidence(key=row.key, evidence=evidence),
            step_id=step_id,
            attempt_number=attempt_number,
        )
    elif row.resolved_at is not None:
        log.warning(
            "late result for claim %s, already resolved as %s by %s: %s",
            row.key,
            row.status,
            row.resolved_by,
            payload(evidence),
        )
        late = events.LateResultAfterResolution(
            key=row.key, evidence=evidence, resolved_as=row.status, resolved_by=row.resolved_by
        )
        events.append_event(started.run.id, late, step_id=step_id, attempt_number=attempt_number)
    else:
        log.warning(
            "late result for claim %s (%s) not kept: %s", row.key, row.status, payload(evidence)
        )


def republish_stale(*, limit: int = 200) -> list[int]:
    """Republish steps that are ready but have not started within the bound
    (RUNS_REPUBLISH_AFTER_SECONDS), counted from when their newest message was due: the
    latest of queued_at (the step became ready and its first message went out), a
    retry's next_attempt_at, and message_due_at (a resume's countdown, or this
    sweeper's own last republish). Their message was lost (broker restart, a worker
    killed between commit and publish). Idempotent: each republish sets message_due_at
    to now, so a step has at most one message out per bound, and queued_at keeps since
    when the step waits (the figures' oldest wait).

    At most as many are sent as the broker's steps queue lacks: the steps waiting for a
    message, less the messages it holds. A deep queue that holds one per step sends
    nothing (their messages are there, merely slow); a partly lost one gets back what
    it lost, not a sweep's `limit` (which, with a worker's few prefetched messages
    missing from the count, would add `limit` duplicates that sat at the queue's end
    until the backlog drained). A broker that cannot be read does not stop the
    republish. Paused steps
    are left alone: their start would be refused, and sending them every sweep is a
    loop (a wait is never paused: its delivery reaches the wait)."""
    cut = Now() - timedelta(seconds=settings.RUNS_REPUBLISH_AFTER_SECONDS)
    startable = (
        Step.objects.filter(Q(active_run()) | (Q(compensating_run()) & ~Q(compensates="")))
        .filter(swept_runs("run_id"))
        .exclude(
            # A paused step waits for its resume, which republishes it (pauses.py); a wait
            # is never held (paused_step).
            paused_step()
        )
        # A step waiting for a slot or a hold has no message by design: a freed slot
        # sends it (attempts/slots.py), not the lapse of time.
        .filter(waiting_for="")
    )
    # Due for a message that has not come: the status and time on step_waiting_idx.
    due = startable.filter(
        Q(status=StepStatus.QUEUED, queued_at__lt=cut)
        | Q(status=StepStatus.RETRYING, next_attempt_at__lt=cut)
    ).filter(Q(message_due_at__isnull=True) | Q(message_due_at__lt=cut))
    if not due.exists():
        return []
    if settings.RUNS_REPUBLISH_BACKOFF:
        missing = _missing_messages(startable)
        if missing == 0:
            return []
        if missing is not None:
            # Which messages are lost it cannot know; how many, it can: no more are sent.
            limit = min(limit, missing)
    with transaction.atomic():
        stale = list(
            due.select_for_update(skip_locked=True)
            .order_by("queued_at")
            .values_list("id", flat=True)[:limit]
        )
        if stale:
            # queued_at and next_attempt_at stay: only when this message is due changes.
            Step.objects.filter(pk__in=stale).update(message_due_at=Now(), held_at=None)
            publish_on_commit(stale)
    return stale


def _missing_messages(startable: Any) -> int | None:
    """How many steps waiting for a message (queued, or retrying and due) the broker's
    steps queue lacks a message for: 0 when it holds at least one per step (back off),
    None if the depth cannot be read. A sweep sends no more than that: in a backlog of
    about 700 steps whose queue lacked 3 or 4 messages (held unacknowledged by a worker
    SIGKILLed earlier, or taken and not started yet), sending the 200 oldest due steps
    again put about 196 duplicates on it (bench/backlog.py)."""
    depth = step_queue_depth()
    if depth is None:
        return None
    waiting: int = startable.filter(
        Q(status=StepStatus.QUEUED) | Q(status=StepStatus.RETRYING, next_attempt_at__lte=Now())
    ).count()
    if depth >= waiting:
        log.info(
            "republish deferred: the steps queue holds %s message(s) for %s waiting step(s)",
            depth,
            waiting,
        )
        return 0
    return waiting - depth


def paused_step() -> Q:
    """A pause holds the step: one of its run's workflow, whole or by its name, stands,
    and the step is not a wait or a sleep. Those take no attempt, so no pause holds
    them: their delivery reaches the wait whatever pauses stand (entry/execute.py,
    start_attempt), and a lost message of theirs is sent again as any other's."""
    paused = Exists(
        Pause.objects.filter(
            Q(step="") | Q(step=OuterRef("name")),
            workflow=Subquery(
                Run.objects.filter(pk=OuterRef(OuterRef("run_id"))).values("workflow")
            ),
        )
    )
    waits = wait_step()
    return Q(paused) & ~waits if waits is not None else Q(paused)


def republish_probes(*, limit: int = 200) -> list[int]:
    """Probes requested but never run (message lost, worker died before the
    compare-and-set), and probes whose lease passed without an answer (their worker
    died or stalled while asking) with tries left: send them again. probe_requested_at
    says when a message last went out: once after the probe that took the claim
    (probed_at), and again only if that message seems lost too."""
    bound = timedelta(seconds=settings.RUNS_REPUBLISH_AFTER_SECONDS)
    never_run = Q(probed_at__isnull=True, probe_requested_at__lt=Now() - bound)
    lease_ended = Q(
        probe_lease_expires_at__lt=Now(), probe_tries__lt=settings.RUNS_PROBE_MAX_TRIES
    ) & (
        Q(probe_requested_at__isnull=True)
        | Q(probe_requested_at__lt=F("probed_at"))
        | Q(probe_requested_at__lt=Now() - bound)
    )
    with transaction.atomic():
        stale = list(
            Claim.objects.select_for_update(skip_locked=True)
            .filter(never_run | lease_ended, swept_runs("run_id"), status=ClaimStatus.UNRESOLVED)
            .values_list("id", flat=True)[:limit]
        )
        if stale:
            Claim.objects.filter(pk__in=stale).update(probe_requested_at=Now())
            transaction.on_commit(lambda: publish_probes(stale))
    return stale


def give_up_probes(*, limit: int = 200) -> list[int]:
    """Claims whose probe used up its tries, the last one's lease passed without an
    answer: each is left to the operator in its own transaction (probe.give_up_probe)."""
    candidates = list(
        Claim.objects.filter(
            swept_runs("run_id"),
            status=ClaimStatus.UNRESOLVED,
            probe_lease_expires_at__lt=Now(),
            probe_tries__gte=settings.RUNS_PROBE_MAX_TRIES,
        ).values_list("id", flat=True)[:limit]
    )
    return [claim_id for claim_id in candidates if give_up_probe(claim_id)]


__all__ = [
    "SweepReport",
    "give_up_probes",
    "recover_attempt",
    "republish_probes",
    "republish_stale",
    "settle_late_finish",
    "sweep",
    "swept_runs",
]
