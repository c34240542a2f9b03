"""What operators do to a run as a whole: cancel it, retry its failed steps. Each is a
conditional transition written with its events in one transaction, and records who
did it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, F
from django.db.models.functions import Now

from runs.engine.core.locks import lock_run
from runs.engine.core.publish import publish_on_commit
from runs.engine.core.versions import workflow_of
from runs.engine.state.compensation import begin_compensation, compensations_not_done
from runs.engine.state.ready import make_ready
from runs.engine.state.steps import step_to_queued
from runs.engine.state.stopped import settle_open_effects
from runs.errors import RunNotActive, RunNotFound, StepNotRetryable
from runs.models import Claim, Run, Step
from runs.principals import actor_name
from runs.record import events
from runs.states import RUN_ACTIVE, STEP_DONE, ClaimStatus, EffectKind, RunStatus, StepStatus
from runs.workflows.definition import Workflow

from .submit import shown_deadline


def cancel_run(*, run_id: uuid.UUID | str, actor: AbstractBaseUser | str, reason: str = "") -> Run:
    """Cancel an active run: no new step starts from now on (starting a step requires
    an active run, in the same UPDATE that starts it), attempts already running finish
    and are recorded, but queue nothing after them; the run ends `cancelled` (first
    `compensating`, if steps that name a compensation succeeded: compensate.py).
    Unresolved claims stay in the reconciliation queue: a decision on them is recorded
    and schedules nothing. Steps waiting for a retry, or queued with an open claim, end
    now, and an effect of unknown outcome that names a compensation goes to a person
    (state/stopped.py). Refuses: RunNotFound, RunNotActive, WorkflowVersionUnknown
    (steps succeeded and this process cannot tell which of them to undo)."""
    who = actor_name(actor)
    reason = (reason or "").strip()
    with transaction.atomic():
        # The run row first (locks.py): a finish holding it commits before we read which
        # steps succeeded, and no start reads the run active after we commit.
        run = lock_run(run_id)
        if run is None:
            raise RunNotFound(run_id)
        if run.status not in RUN_ACTIVE:
            raise RunNotActive(run, "cancelled")
        cancel_locked(run, who=who, reason=reason)
    run.refresh_from_db()
    return run


def cancel_locked(run: Run, *, who: str, reason: str) -> None:
    """The cancel itself, for a run the caller locked (lock_run) and found active:
    cancel_run's, and a deadline's (policies/deadlines.py), so both write the same rows
    and events. Raises WorkflowVersionUnknown as begin_compensation does."""
    error = f"cancelled by {who}" + (f": {reason}" if reason else "")
    # Steps that name a compensation succeeded: undo them first (compensate.py);
    # the run ends cancelled when they are done.
    if begin_compensation(run, ends_as=RunStatus.CANCELLED, error=error, actor=who):
        return
    n = Run.objects.filter(pk=run.id, status__in=RUN_ACTIVE).update(
        status=RunStatus.CANCELLED, error=error, finished_at=Now(), updated_at=Now()
    )
    assert n == 1, "the run is locked and was active"
    running = list(
        Step.objects.filter(run_id=run.id, status=StepStatus.RUNNING, parent__isnull=True)
        .order_by("id")
        .values_list("key", flat=True)
    )
    events.append_event(
        run.id, events.RunCancelled(actor=who, reason=reason, still_running=running)
    )
    # Steps waiting for a retry, or queued holding a claim, never start now (as
    # begin_compensation settles them when the run compensates instead).
    settle_open_effects(run, why=f"the run was cancelled by {who}")


# --- retrying failed steps ---------------------------------------------------------------
@dataclass(frozen=True)
class Effect:
    """An effect of the run that already happened and will not be repeated."""

    step: str
    kind: str
    key: str
    items: int = 0  # for a map step: how many of its items completed


@dataclass(frozen=True)
class RetryPlan:
    """What retrying would do, computed without writing: the steps (batches) that get
    a new attempt, with the idempotency key each will use, and the effects of this run
    that already happened and will not be repeated."""

    run_id: uuid.UUID
    steps: tuple[tuple[str, str, str], ...]  # (step key, kind, what its key will be)
    done: tuple[Effect, ...]
    summary: str


def _failed_steps(run: Run, step_keys: list[str]) -> list[Step]:
    """The failed steps named (a map step's name stands for its failed batches). In a
    run that was being compensated only its compensations can be retried: the run is
    being undone, its plan is not resumed."""
    failed = list(Step.objects.filter(run=run, status=StepStatus.FAILED).order_by("id"))
    if _compensated(run):
        failed = [s for s in failed if s.compensates]
    wanted: list[Step] = []
    unknown = []
    for key in step_keys:
        matches = [s for s in failed if s.key == key or (s.parent_id and s.name == key)]
        if not matches:
            unknown.append(key)
        wanted.extend(m for m in matches if m not in wanted)
    if unknown:
        known = ", ".join(sorted({s.key for s in failed})) or "none"
        raise StepNotRetryable(
            f"run {run.id} has no failed step {', '.join(unknown)} (failed steps: {known})"
        )
    others = [s.key for s in failed if s not in wanted]
    if others:
        raise StepNotRetryable(
            f"run {run.id} has other failed steps ({', '.join(others)}): retry them together, "
            "or the run could never finish"
        )
    return wanted


def _compensated(run: Run) -> bool:
    return Step.objects.filter(run=run, parent__isnull=True).exclude(compensates="").exists()


def _latest_claim(step: Step) -> Claim | None:
    """The step's newest claim (a map batch has none of its own: its items have theirs).
    Claims are never deleted while a run can be retried, and each generation's key is
    new, so the newest is the current generation's when it took one."""
    if step.parent_id is not None:
        return None
    return Claim.objects.filter(step=step, item_key__isnull=True).order_by("-id").first()


def _takes_new_key(claim: Claim | None) -> bool:
    """Whether a retry moves to the next key (`…/retry-<n>`): only when the newest claim
    failed, i.e. its effect did not happen. An abandoned claim (an idempotent effect of
    unknown outcome) keeps its key: a new key would let the external system act twice.
    The preview (_retry_key) and the retry (retry_steps) both ask this."""
    return claim is not None and claim.status == ClaimStatus.FAILED


def _retry_key(run: Run, step: Step) -> str:
    if step.parent_id is not None:
        return "each item keeps its key; completed items are skipped"
    claim = _latest_claim(step)
    if claim is None:
        return "no claim" if step.kind == EffectKind.PURE else "a new claim"
    if _takes_new_key(claim):
        return f"a new key …/retry-{step.claim_generation + 1} (the earlier effect did not happen)"
    return f"the same key {claim.key} (the external system dedupes it)"


def _checked_run(run_id: uuid.UUID | str) -> Run:
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(run_id)
    if run.status != RunStatus.FAILED:
        raise RunNotActive(run, "retried (only a failed run's steps are retried)")
    if run.retention_started_at is not None:
        # What a retried step reads may be gone: the registry stage deletes a map's item
        # claims (ctx.collected would read None for each item), the payload stage turns
        # results into digests. Retention's stages lock the run first, so a retry that
        # holds the run sees every stage that committed before it.
        raise StepNotRetryable(
            f"run {run.id} cannot be retried: retention compacted it (since "
            f"{run.retention_started_at:%Y-%m-%d %H:%M:%S}): its map items' results, "
            "inputs and results may be gone"
        )
    if (
        run.deadline_at is not None
        and not _compensated(run)
        and Run.objects.filter(pk=run.id, deadline_at__lte=Now()).exists()
    ):
        # Its steps could not start (the start statement refuses them) and the sweep
        # would end it again at once (policies/deadlines.py). A failed compensation of
        # a compensated run is still retried: the deadline never blocks its undoing.
        raise StepNotRetryable(
            f"run {run.id} cannot be retried: its deadline passed "
            f"({shown_deadline(run.deadline_at)}), so none of its steps may start"
        )
    return run


def preview_retry(*, run_id: uuid.UUID | str, step_keys: list[str]) -> RetryPlan:
    """What retry_steps(run_id, step_keys) would do now, as a RetryPlan: the steps that
    get a new attempt with the key each will use, and the effects that will not be
    repeated. Writes nothing. Refuses as the retry would: RunNotFound, RunNotActive,
    StepNotRetryable, WorkflowVersionUnknown."""
    run = _checked_run(run_id)
    steps = _failed_steps(run, step_keys)
    workflow_of(run, doing="retry its steps")  # refused here as the retry would be
    done: list[Effect] = []
    for claim in (
        Claim.objects.filter(run=run, item_key__isnull=True, status=ClaimStatus.SUCCEEDED)
        .select_related("step")
        .order_by("id")
    ):
        done.append(Effect(claim.step.key, claim.kind, claim.key))
    items = (
        Claim.objects.filter(run=run, item_key__isnull=False, status=ClaimStatus.SUCCEEDED)
        .values_list("step__name", "kind")
        .annotate(n=Count("id"))
        .order_by("step__name")
    )
    for name, kind, n in items:
        done.append(Effect(name, kind, "", n))
    planned = tuple((s.key, s.kind, _retry_key(run, s)) for s in steps)
    names = ", ".join(key for key, _, _ in planned)
    summary = f"retry {names}: a new attempt each" + (
        f"; {len(done)} effect(s) already done are kept and not repeated" if done else ""
    )
    return RetryPlan(run.id, planned, tuple(done), summary)


def retry_steps(
    *,
    run_id: uuid.UUID | str,
    step_keys: list[str],
    actor: AbstractBaseUser | str,
    reason: str = "",
    batch: int | None = None,
) -> Run:
    """Give failed steps of a failed run a new attempt, and reopen the run: to
    `needs_reconciliation` if claims still wait for a decision, `waiting` if a branch
    waits for a signal or a time, else `running` (`compensating` for a failed
    compensation retried).

    The run's plan is put back as if the failed steps had not run yet, and every step is
    then decided by the rules that decide it the first time: a step that never started
    (its condition raised, its map's collection was refused) goes back to `pending` and
    make-ready decides it (its condition is evaluated again, a map expands); one that
    ran is queued. The counters (each pending step's dependencies not yet done, the
    run's steps remaining, or its compensations not yet done for a run that compensates
    again) are recomputed from the steps' statuses, with one meaning of done everywhere:
    succeeded or skipped. Steps that became ready while the run was
    failed (their dependencies finished, or were resolved, meanwhile) are queued too.

    Idempotency keys follow the usual rules: a step whose claim was abandoned (an
    idempotent effect of unknown outcome) retries with the SAME key; one whose claim
    failed (the effect did not happen) gets a new key (`…/retry-<n>`); a map batch
    keeps its items' keys and skips every completed item. Each retried step gets its
    retry policy's attempts again. `reason`, if given, is recorded in the run_reopened
    event. Refuses: RunNotFound, RunNotActive (the run did not fail), StepNotRetryable,
    WorkflowVersionUnknown (this process lacks the run's version: the attempts to grant
    and the steps that become ready are the definition's)."""
    who = actor_name(actor)
    reason = (reason or "").strip()
    with transaction.atomic():
        run = lock_run(run_id)
        if run is None:
            raise RunNotFound(run_id)
        run = _checked_run(run.id)
        steps = _failed_steps(run, step_keys)
        # Each step's attempts come from its retry policy, and the steps that become
        # ready are decided by the plan's rules: both need the definition.
        workflow = workflow_of(run, doing="retry its steps")
        compensating = _compensated(run)
        status = _reopened_status(run, compensating=compensating)
        changes: dict[str, Any] = {
            "status": status,
            "error": "",
            "finished_at": None,
            # Recomputed, not trusted: a step that finished while the run was failed (or
            # a resolution) moved the counter under the run's other meaning of it.
            "steps_remaining": compensations_not_done(run.id)
            if compensating
            else _plan_steps_not_done(run),
        }
        n = Run.objects.filter(pk=run.id, status=RunStatus.FAILED).update(
            **changes, updated_at=Now()
        )
        assert n == 1, "the run is locked and failed"
        reopened = events.RunReopened(
            actor=who,
            steps=[s.key for s in steps],
            status=status,
            reason=reason or "",
            max_attempts={s.key: s.max_attempts for s in steps},
            batch=batch,
        )
        events.append_event(run.id, reopened)
        queued: list[int] = []
        for step in steps:
            stepdef = workflow.stepdef(step.name)
            if stepdef is None:  # a step this version does not declare: never retried blind
                raise StepNotRetryable(
                    f"workflow {run.workflow} v{run.version} declares no step {step.name}"
                )
            grant = stepdef.retry.max_attempts
            new_key = _takes_new_key(_latest_claim(step))
            # Never started: decided again by make-ready (_queue_ready_pending), which
            # writes its events; the pending state in between is not seen outside.
            reset: dict[str, Any] = {
                "finished_at": None,
                "error": "",
                "max_attempts": F("attempts") - F("deferred_attempts") + grant,
                "claim_generation": F("claim_generation") + (1 if new_key else 0),
                "wake_at": None,  # a retried wait or sleep starts its timer again
            }
            if _never_started(step):
                n = Step.objects.filter(pk=step.id, status=StepStatus.FAILED).update(
                    status=StepStatus.PENDING, queued_at=None, **reset
                )
                took = n == 1
            else:
                took = step_to_queued(
                    run.id,
                    step.id,
                    step.key,
                    was=StepStatus.FAILED,
                    reason=f"retried by {who}",
                    **reset,
                )
                if took:
                    queued.append(step.id)
            if not took:
                raise StepNotRetryable(f"step {step.key} is no longer failed")
        if not compensating:
            queued.extend(_queue_ready_pending(run, workflow))
        # Steps queued before the run failed never started, and steps waiting for
        # their retry found the run failed when it came (both messages were refused
        # meanwhile): send them again. A retry whose time has not come is started when
        # it has (start.republish_if_early).
        again_queued = Step.objects.filter(
            run=run, status__in=[StepStatus.QUEUED, StepStatus.RETRYING]
        ).exclude(pk__in=queued)
        if compensating:
            again_queued = again_queued.exclude(compensates="")
        queued.extend(again_queued.values_list("id", flat=True))
        publish_on_commit(queued)
    run.refresh_from_db()
    return run


def failed_step_keys(run: Run) -> list[str]:
    """Every failed step that a retry of the whole run names, as `_failed_steps` takes
    them: a top-level step by its key, a map's failed batches by the map's name; in a
    run that was compensated, only its compensations."""
    compensated = _compensated(run)
    keys: list[str] = []
    for step in Step.objects.filter(run=run, status=StepStatus.FAILED).order_by("id"):
        if compensated and not step.compensates:
            continue
        key = step.name if step.parent_id else step.key
        if key not in keys:
            keys.append(key)
    if not keys:
        raise StepNotRetryable(f"run {run.id} has no failed step that can be retried")
    return keys


def preview_retry_run(*, run_id: uuid.UUID | str) -> RetryPlan:
    """preview_retry for every failed step of the run (a bulk retry's preview): a
    RetryPlan, nothing written. Refuses as preview_retry does."""
    run = _checked_run(run_id)
    return preview_retry(run_id=run.id, step_keys=failed_step_keys(run))


def retry_run(
    *,
    run_id: uuid.UUID | str,
    actor: AbstractBaseUser | str,
    reason: str = "",
    batch: int | None = None,
) -> Run:
    """retry_steps for every failed step of the run (a bulk retry, one run; `batch`, the
    batch's id, is recorded on its run_reopened event): which steps failed is read after
    the run is locked, so it is what retry_steps checks again. Returns the run reopened;
    refuses as retry_steps does, nothing written."""
    with transaction.atomic():
        run = lock_run(run_id)
        if run is None:
            raise RunNotFound(run_id)
        run = _checked_run(run.id)
        keys = failed_step_keys(run)
        return retry_steps(run_id=run.id, step_keys=keys, actor=actor, reason=reason, batch=batch)


def _never_started(step: Step) -> bool:
    """A step of the plan that failed before it ever started: its condition raised, or
    its map's collection was refused (a started step, or a wait that was reached, has
    started_at)."""
    return step.parent_id is None and not step.compensates and step.started_at is None


def _reopened_status(run: Run, *, compensating: bool) -> str:
    if compensating:  # a failed compensation retried: the run compensates again
        return RunStatus.COMPENSATING
    if Claim.objects.filter(run=run, status=ClaimStatus.UNRESOLVED).exists():
        return RunStatus.NEEDS_RECONCILIATION
    if Step.objects.filter(run=run, status=StepStatus.WAITING).exists():
        return RunStatus.WAITING  # some step waits, none is unresolved (runs/states.py)
    return RunStatus.RUNNING


def _plan_steps_not_done(run: Run) -> int:
    """The run's steps of the plan (not batches, not compensations) not yet done."""
    return (
        Step.objects.filter(run=run, parent__isnull=True, compensates="")
        .exclude(status__in=STEP_DONE)
        .count()
    )


def _queue_ready_pending(run: Run, workflow: Workflow) -> list[int]:
    """Pending top-level steps: their count of dependencies not yet done set from the
    steps' statuses (the run's counters stopped moving while it was failed), and those
    with none left made ready (queued, expanded, or skipped by their condition)."""
    done = set(
        Step.objects.filter(run=run, parent__isnull=True, status__in=STEP_DONE).values_list(
            "name", flat=True
        )
    )
    ready: list[int] = []
    for step in Step.objects.filter(
        run=run, parent__isnull=True, status=StepStatus.PENDING
    ).order_by("id"):
        missing = [d for d in step.depends_on if d not in done]
        if step.pending_deps != len(missing):
            Step.objects.filter(pk=step.id).update(pending_deps=len(missing))
        if not missing:
            step.pending_deps = 0
            ready.extend(make_ready(run.id, step, workflow))
    return ready
