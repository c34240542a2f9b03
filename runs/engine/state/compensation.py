"""Compensation: when a run is cancelled or fails after steps that name a
compensation (`compensate=`) succeeded, the run goes `compensating` and those
compensations run as steps of their own (own effect kind, claim, retries, probe), one
after another in reverse order of the completions they undo. When the last one
succeeds the run ends as it was ending (`ends_as`: cancelled or failed). One that
fails for good ends the run failed, naming it; one whose claim is unresolved goes to
the reconciliation queue like any other, and the run stays compensating until it is
resolved.

While compensating, `Run.steps_remaining` counts the compensations not yet done: the
steps of the plan no longer start (the run is not active), and one that was running
and succeeds meanwhile gets its compensation added (compensate_late_step).
"""

from __future__ import annotations

import uuid

from django.db import connection
from django.db.models import F, Q
from django.db.models.functions import Now

from runs import sql
from runs.engine.core.locks import lock_run
from runs.engine.core.publish import publish_on_commit
from runs.errors import WorkflowVersionUnknown
from runs.models import Run, Step
from runs.record import events
from runs.states import RUN_ACTIVE, STEP_DONE, RunStatus, StepStatus
from runs.workflows import registry
from runs.workflows.definition import Workflow

from .revision import bump_revision
from .steps import step_to_queued
from .stopped import settle_open_effects

SQL = sql.load(__file__)


def _compensable(workflow: Workflow) -> dict[str, str]:
    """step name -> the name of its compensation."""
    return {s.name: s.compensate for s in workflow.steps.values() if s.compensate}


def begin_compensation(run: Run, *, ends_as: str, error: str, actor: str | None = None) -> bool:
    """If steps of this active run that name a compensation have succeeded, move the
    run to `compensating`, put their compensations in the plan under a new revision
    (newest completion first, each after the previous), and queue the first. False,
    changing nothing, when there is nothing to undo.

    `run` must be locked by the caller (locks.lock_run) and active: the succeeded steps
    are read after that lock, so a step whose finish held the run row until its commit
    is seen succeeded here, and one that finishes later finds the run compensating (or
    ended) and is compensated then (compensate_late_step). The run then stops for good:
    what its plan left open is settled in the same transaction (state/stopped.py).

    A process without the run's workflow version cannot tell which succeeded steps name
    a compensation: unless none succeeded, it refuses (WorkflowVersionUnknown), never
    reading "unknown" as "nothing to undo"."""
    run_id = run.id
    workflow = registry.get(run.workflow, run.version)
    if workflow is None:
        if not Step.objects.filter(
            run_id=run_id, parent__isnull=True, compensates="", status=StepStatus.SUCCEEDED
        ).exists():
            return False  # nothing succeeded: whatever the definition says, nothing to undo
        raise WorkflowVersionUnknown(run, "tell which of its succeeded steps to undo")
    if not workflow.compensations:
        return False
    compensable = _compensable(workflow)
    done = list(
        Step.objects.filter(
            run_id=run_id,
            parent__isnull=True,
            status=StepStatus.SUCCEEDED,
            name__in=list(compensable),
        )
        .order_by(F("finished_at").desc(nulls_last=True), "-id")
        .values_list("name", flat=True)
    )
    if not done:
        return False
    n = Run.objects.filter(pk=run_id, status__in=RUN_ACTIVE).update(
        status=RunStatus.COMPENSATING,
        ends_as=ends_as,
        error=error,
        steps_remaining=len(done),
        updated_at=Now(),
    )
    if n != 1:
        raise RuntimeError(f"run {run_id} is locked but no longer active")
    order = [compensable[name] for name in done]
    events.append_event(
        run_id,
        events.RunCompensating(
            ends_as=ends_as, error=error, compensations=order, actor=actor or "engine"
        ),
    )
    revision = bump_revision(run_id)
    previous: str | None = None
    first: list[int] = []
    for undone in done:
        step = _plan(run_id, workflow, undone, compensable[undone], revision, after=previous)
        if previous is None:
            first.append(step.id)
        previous = step.name
    publish_on_commit(first)
    why = (
        f"the run was cancelled by {actor or 'engine'}"
        if ends_as == RunStatus.CANCELLED
        else "the run failed and compensates"
    )
    settle_open_effects(run, why=why)
    return True


def _plan(
    run_id: uuid.UUID,
    workflow: Workflow,
    undone: str,
    name: str,
    revision: int,
    *,
    after: str | None,
    failed: str = "",
) -> Step:
    stepdef = workflow.compensations[name]
    status = StepStatus.PENDING if after else StepStatus.QUEUED
    if failed:
        status = StepStatus.FAILED
    step = Step.objects.create(
        run_id=run_id,
        key=name,
        name=name,
        kind=stepdef.kind,
        compensates=undone,
        depends_on=[after] if after else [],
        pending_deps=1 if after else 0,
        max_attempts=stepdef.retry.max_attempts,
        plan_revision=revision,
        status=status,
        error=failed,
    )
    if status == StepStatus.QUEUED:
        Step.objects.filter(pk=step.id).update(queued_at=Now())
    planned = events.CompensationPlanned(
        step=step.key, compensates=undone, status=status, after=after, error=failed
    )
    events.append_event(run_id, planned, step_id=step.id)
    return step


def compensation_succeeded(*, run_id: uuid.UUID, step: Step) -> list[int]:
    """A compensation succeeded: queue the next one, or end the run as it was ending
    when this was the last."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["one_done"], {"run": run_id, "compensating": RunStatus.COMPENSATING})
        row = cursor.fetchone()
    if row is None:
        return []  # the run ended meanwhile (a compensation failed for good)
    remaining, ends_as = int(row[0]), row[1]
    if remaining == 0:
        n = Run.objects.filter(pk=run_id, status=RunStatus.COMPENSATING).update(
            status=ends_as, finished_at=Now(), updated_at=Now()
        )
        assert n == 1
        ended = events.RunCancelled if ends_as == RunStatus.CANCELLED else events.RunFailed
        events.append_event(run_id, ended(compensated=True))
        return []
    ready: list[int] = []
    for nxt in Step.objects.filter(
        run_id=run_id, parent__isnull=True, depends_on__contains=[step.name]
    ).exclude(compensates=""):
        if step_to_queued(
            run_id,
            nxt.id,
            nxt.key,
            was=StepStatus.PENDING,
            only_if=Q(pending_deps=1),
            pending_deps=0,
        ):
            ready.append(nxt.id)
    return ready


def compensate_late_step(*, run_id: uuid.UUID, step: Step, workflow: Workflow) -> list[int]:
    """A step of the plan succeeded after its run stopped going on (it was running, or
    its unresolved claim was resolved as succeeded, when the run was cancelled or
    failed): if it names a compensation, that compensation is planned and queued (it
    undoes the newest completion). Returns the ids to publish.

    Decided under the run row's lock (core/locks.py), so the last compensation cannot end the
    run between this decision and its effect:
    - the run compensates: the compensation joins it (counted in steps_remaining);
    - the run already ended (cancelled or failed, its compensations done or none
      needed): it is reopened to compensate this one step, and ends as it was ending;
    - the run ended failed because a compensation failed for good: this one is planned
      `failed` beside it (never run silently out of order), so retrying the failed
      compensations runs it too."""
    name = _compensable(workflow).get(step.name)
    if name is None:
        return []
    run = lock_run(run_id)
    assert run is not None  # this step's row refers to it
    if Step.objects.filter(run_id=run_id, key=name).exists():
        return []  # planned already (by begin_compensation, or a resolution before)
    if run.status == RunStatus.COMPENSATING:
        Run.objects.filter(pk=run_id).update(steps_remaining=F("steps_remaining") + 1)
        return [_plan(run_id, workflow, step.name, name, run.plan_revision, after=None).id]
    if run.status not in (RunStatus.CANCELLED, RunStatus.FAILED):
        return []  # still active: the plan goes on, nothing to undo
    if (
        Step.objects.filter(run_id=run_id, parent__isnull=True, status=StepStatus.FAILED)
        .exclude(compensates="")
        .exists()
    ):
        _plan(
            run_id,
            workflow,
            step.name,
            name,
            run.plan_revision,
            after=None,
            failed=f"not run: {step.key} succeeded after the run's compensation had failed; "
            "retry the failed compensations to run it too",
        )
        # Counted, not added to: the finish's counter UPDATE already took this step off
        # (the run is failed, not compensating), so a +1 would leave one compensation
        # uncounted and the retry would end the run with it still queued.
        Run.objects.filter(pk=run_id).update(steps_remaining=compensations_not_done(run_id))
        return []
    ends_as = run.status
    n = Run.objects.filter(pk=run_id, status=ends_as).update(
        status=RunStatus.COMPENSATING,
        ends_as=ends_as,
        steps_remaining=1,
        finished_at=None,
        updated_at=Now(),
    )
    assert n == 1, "the run is locked"
    events.append_event(
        run_id,
        events.RunCompensating(
            ends_as=ends_as,
            error=run.error,
            compensations=[name],
            actor="engine",
            reason=f"step {step.key} succeeded after the run had {ends_as}",
        ),
    )
    revision = bump_revision(run_id)
    return [_plan(run_id, workflow, step.name, name, revision, after=None).id]


def compensations_not_done(run_id: uuid.UUID) -> int:
    """The run's compensations not yet succeeded: what `steps_remaining` counts while it
    compensates."""
    return (
        Step.objects.filter(run_id=run_id, parent__isnull=True)
        .exclude(compensates="")
        .exclude(status__in=STEP_DONE)
        .count()
    )
