"""What a step's success (or skip) makes ready: its dependents' counters, a map's
batches, the run's end."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models.functions import Now

from runs import sql
from runs.engine.core import definitions
from runs.models import Step
from runs.record import events
from runs.sql import prepared
from runs.states import RUN_ACTIVE, RunStatus, StepStatus
from runs.workflows.definition import Workflow

from .compensation import compensate_late_step, compensation_succeeded
from .conditions import condition_holds
from .expand import expand
from .run import ACTIVE, succeed_run
from .steps import step_to_queued

SQL = sql.load(__file__)


def succeed_step(
    run_id: uuid.UUID,
    step: Step,
    workflow: Workflow,
    *,
    was: str,
    result: Any,
    resolved_by: str | None = None,
    **columns: Any,
) -> list[int]:
    """The edge step `was` → succeeded with everything that follows it: the conditional
    UPDATE (`columns` set with it), its `step_succeeded` event (naming who resolved it,
    for a claim decided by a person), then step_succeeded(): the counters, the dependents
    made ready, the run's end. Returns the ids of the steps that became queued (the caller
    publishes them after its commit). The fast twin is attempts/finish.sql's
    `succeed_and_dependents`, whose caller writes the same event and hands its rows to
    step_succeeded(found=...)."""
    n = Step.objects.filter(pk=step.id, status=was).update(
        status=StepStatus.SUCCEEDED, result=result, finished_at=Now(), **columns
    )
    if n != 1:
        raise RuntimeError(f"step {step.key} was not {was}")
    events.append_event(
        run_id, events.StepSucceeded(step=step.key, resolved_by=resolved_by), step_id=step.id
    )
    return step_succeeded(run_id=run_id, step=step, workflow=workflow)


def step_succeeded(
    *,
    run_id: uuid.UUID,
    step: Step,
    workflow: Workflow,
    found: list[tuple[Any, ...]] | None = None,
) -> list[int]:
    """Propagate a step's success; return the ids of steps that became queued.

    A batch decrements its map parent; a top-level step decrements the run's counter
    and its dependents' pending-dependency counters (an indexed lookup by name, never a
    scan of the plan). `found`: the rows of that UPDATE when the finish's own statement
    already ran it (_fence_and_succeed)."""
    if step.parent_id is not None:
        remaining = _batch_done(run_id, step.parent_id)
        if remaining != 0:
            return []
        parent = Step.objects.get(pk=step.parent_id)
        return succeed_step(
            run_id,
            parent,
            workflow,
            was=StepStatus.RUNNING,
            result={"items": _count_items(parent), "batches": parent.batches.count()},
        )

    if step.compensates:
        return compensation_succeeded(run_id=run_id, step=step)
    direct, careful = dependents_of(workflow, step.name)
    # One statement: the run's counter of remaining steps goes down and, while the run is
    # active and has steps left, so do the dependents' pending-dependency counters; a
    # plain dependent whose last dependency this was is queued in the same UPDATE (a map
    # step, or one with a condition, is made ready below). Dependents are found by index
    # (the run's steps, or (run, name)), never by a scan of the plan. A cancelled (or
    # failed) run queues nothing after this step. While a run compensates,
    # steps_remaining counts its compensations: a step of the plan that finishes
    # meanwhile (it was running) does not touch it, but gets a compensation of its own.
    if found is None:
        with prepared.cursor() as cursor:
            cursor.execute(SQL["dependents"], dependents_params(run_id, direct, careful))
            found = cursor.fetchall()
    if not found or found[0][1] not in RUN_ACTIVE:
        # The run compensates (the counter UPDATE matched no row: it exists, this step's
        # row refers to it), or was cancelled or failed while this step ran: nothing
        # follows this step, but its compensation, if it names one, must run.
        return compensate_late_step(run_id=run_id, step=step, workflow=workflow)
    if int(found[0][0]) == 0:
        succeed_run(run_id, workflow)
        return []
    rows = [row[2:] for row in found if row[2] is not None]
    queued: list[int] = []
    for step_id, key, name, pending, status in rows:
        if pending != 0:
            continue
        if name in careful:  # a map step, or one with a condition
            queued.extend(make_ready(run_id, Step.objects.get(pk=step_id), workflow))
            continue
        if status != StepStatus.QUEUED:
            raise RuntimeError(f"step {key} was not pending")
        step_to_queued(run_id, step_id, key, was=None)  # the dependents statement moved it
        queued.append(step_id)
    return queued


def dependents_params(run_id: uuid.UUID, direct: list[str], careful: list[str]) -> dict[str, Any]:
    return {
        "run": run_id,
        "names": direct + careful,
        "plain": direct,
        "pending": StepStatus.PENDING,
        "queued": StepStatus.QUEUED,
        "compensating": RunStatus.COMPENSATING,
        "active": ACTIVE,
    }


def dependents_of(workflow: Workflow, step_name: str) -> tuple[list[str], list[str]]:
    """The step's dependents: those queued directly by the UPDATE that makes them ready,
    and those make_ready() decides (map steps, expanded; steps with a condition, maybe
    skipped). Computed once per worker process (core/definitions.py)."""

    def derive() -> tuple[list[str], list[str]]:
        names = workflow.dependents(step_name)
        careful = {n for n in names if workflow.steps[n].is_map or workflow.steps[n].when}
        return [n for n in names if n not in careful], [n for n in names if n in careful]

    return definitions.once("dependents", workflow, step_name, derive)


def make_ready(run_id: uuid.UUID, step: Step, workflow: Workflow) -> list[int]:
    """A pending step's dependencies are done: queue it (expand it, for a map step), or
    skip it if its condition is false (its dependents then proceed, as after a
    success)."""
    stepdef = workflow.steps[step.name]
    if stepdef.when is not None:
        holds = condition_holds(run_id, step, stepdef)
        if holds is None:  # the condition raised: the step failed, and the run
            return []
        if not holds:
            n = Step.objects.filter(pk=step.id, status=StepStatus.PENDING).update(
                status=StepStatus.SKIPPED, finished_at=Now()
            )
            if n != 1:
                raise RuntimeError(f"step {step.key} was not pending")
            events.append_event(run_id, events.StepSkipped(step=step.key), step_id=step.id)
            return step_succeeded(run_id=run_id, step=step, workflow=workflow)
    if stepdef.is_map:
        batches = expand(run_id=run_id, parent=step, workflow=workflow)
        if batches is None:  # an empty collection: the map step succeeds at once
            return succeed_step(
                run_id, step, workflow, was=StepStatus.RUNNING, result={"items": 0, "batches": 0}
            )
        return batches
    if not step_to_queued(run_id, step.id, step.key, was=StepStatus.PENDING):
        raise RuntimeError(f"step {step.key} was not pending")
    return [step.id]


def _batch_done(run_id: uuid.UUID, parent_id: int) -> int:
    with prepared.cursor() as cursor:
        cursor.execute(SQL["batch_done"], {"run": run_id, "parent": parent_id})
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])


def _count_items(parent: Step) -> int:
    return sum(len(items or []) for items in parent.batches.values_list("items", flat=True))
