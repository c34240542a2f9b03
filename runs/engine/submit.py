"""submit_run(): validate, write the run, its plan and its first events in one
transaction, and queue the first steps after commit."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.functions import Now

from runs import events
from runs.models import Run, Step
from runs.states import StepStatus
from runs.workflows import registry
from runs.workflows.definition import Workflow

from .dispatch import publish_on_commit
from .errors import UnknownVersion, UnknownWorkflow


def resolve_workflow(name: str, version: int | None = None) -> Workflow:
    """The registered workflow `name` at `version` (latest when None), or a refusal
    that lists what is known."""
    if version is None:
        wf = registry.latest(name)
    else:
        wf = registry.get(name, version)
    if wf is None:
        known = registry.versions(name)
        if known and version is not None:
            raise UnknownVersion(name, version, known)
        raise UnknownWorkflow(name, sorted({w.name for w in registry.all_workflows()}))
    return wf


def submit_run(*, workflow: str, version: int | None = None, input: Any) -> Run:
    wf = resolve_workflow(workflow, version)
    clean = wf.validate_input(input)
    with transaction.atomic():
        run = Run.objects.create(
            workflow=wf.name, version=wf.version, input=clean, steps_remaining=len(wf.steps)
        )
        Step.objects.bulk_create(
            Step(
                run=run,
                key=s.name,
                name=s.name,
                kind=s.kind,
                depends_on=list(s.after),
                pending_deps=len(s.after),
                max_attempts=s.retry.max_attempts,
                plan_revision=run.plan_revision,
                status=StepStatus.PENDING if s.after else StepStatus.QUEUED,
            )
            for s in wf.steps.values()
        )
        Step.objects.filter(run=run, status=StepStatus.QUEUED).update(queued_at=Now())
        events.append_event(
            run.id,
            events.RUN_SUBMITTED,
            workflow=wf.name,
            version=wf.version,
            input=clean,
            plan=[{"key": s.name, "after": list(s.after)} for s in wf.steps.values()],
        )
        first = list(
            Step.objects.filter(run=run, status=StepStatus.QUEUED).values_list("id", "name")
        )
        for step_id, name in first:
            events.append_event(run.id, events.STEP_QUEUED, step_id=step_id, step=name)
        publish_on_commit([step_id for step_id, _ in first])
    run.refresh_from_db()
    return run
