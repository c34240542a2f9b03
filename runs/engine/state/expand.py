"""A map step that became ready expands into batch steps under a new plan revision
(docs/architecture.md). A collection it cannot map fails the step and the run before
any batch exists."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models.functions import Now

from runs.engine.core import keys
from runs.models import Run, Step
from runs.record import events
from runs.states import StepStatus
from runs.workflows.definition import StepDef, Workflow

from .revision import bump_revision
from .run import fail_step


def expand(*, run_id: uuid.UUID, parent: Step, workflow: Workflow) -> list[int] | None:
    """Turn a ready map step into batch steps under a new plan revision; return the
    ids of the queued batches; None for an empty list, when the parent succeeded (the
    caller then goes on as after any step's success).

    A collection the step cannot map (not a list, an item its key function cannot name,
    two items with one key) fails the map step and the run, before any batch exists:
    two items sharing a key would share a claim, and the second would be skipped as
    already done."""
    stepdef = workflow.steps[parent.name]
    assert stepdef.over is not None
    source = Step.objects.get(run_id=run_id, name=stepdef.over, parent__isnull=True)
    collection = source.result
    run = Run.objects.get(pk=run_id)
    if not isinstance(collection, list):
        return _refuse(
            run_id,
            parent,
            f"map step {parent.name!r} needs a list from {stepdef.over!r}, "
            f"got {type(collection).__name__}",
        )
    try:
        pairs = _keyed_items(stepdef, collection)
    except _Unmappable as exc:
        return _refuse(run_id, parent, str(exc))
    size = stepdef.batch_size_for(run.input)
    batches = [pairs[i : i + size] for i in range(0, len(pairs), size)]
    revision = bump_revision(run_id)
    n = Step.objects.filter(pk=parent.id, status=StepStatus.PENDING).update(
        status=StepStatus.RUNNING, pending_children=len(batches), started_at=Now()
    )
    if n != 1:
        raise RuntimeError(f"map step {parent.key} was not pending")
    created = Step.objects.bulk_create(
        Step(
            run_id=run_id,
            key=f"{parent.name}[{index}]",
            name=parent.name,
            kind=parent.kind,
            parent=parent,
            batch_index=index,
            items=batch,
            plan_revision=revision,
            max_attempts=parent.max_attempts,
            status=StepStatus.QUEUED,
        )
        for index, batch in enumerate(batches)
    )
    ids = [s.id for s in created]
    Step.objects.filter(pk__in=ids).update(queued_at=Now())
    events.append_event(
        run_id,
        events.PlanExpanded(
            step=parent.key,
            revision=revision,
            items=len(pairs),
            batches=len(batches),
            batch_size=size,
        ),
        step_id=parent.id,
    )
    if not batches:
        return None  # nothing to queue: the caller makes it succeed (ready.succeed_step)
    return ids


class _Unmappable(Exception):
    """Why a map step's collection cannot be expanded (its message fails the step)."""


def _keyed_items(stepdef: StepDef, collection: list[Any]) -> list[dict[str, Any]]:
    """Each item with its key (keys.key_of_item), unique in the collection."""
    where = f"of the list from {stepdef.over!r}"
    first_at: dict[str, int] = {}
    pairs: list[dict[str, Any]] = []
    for index, item in enumerate(collection):
        try:
            key = keys.key_of_item(item, stepdef.key)
        except Exception as exc:  # the workflow's own code, run by the engine
            raise _Unmappable(
                f"map step {stepdef.name!r}: its key function raised {exc!r} on item "
                f"[{index}] {where}"
            ) from exc
        first = first_at.setdefault(key, index)
        if first != index:
            if stepdef.key is not None:
                raise _Unmappable(
                    f"map step {stepdef.name!r}: its key function gives items [{first}] and "
                    f"[{index}] {where} the same key {key!r}; each item needs a key of its "
                    "own (its claim)"
                )
            raise _Unmappable(
                f"map step {stepdef.name!r}: items [{first}] and [{index}] {where} have the "
                f"same key {key!r}; each item needs a key of its own (its claim): pass "
                "map_step(..., key=fn) to name items by what identifies them, or remove "
                "the duplicate"
            )
        pairs.append({"key": key, "item": item})
    return pairs


def _refuse(run_id: uuid.UUID, parent: Step, error: str) -> list[int]:
    """Fail a map step that cannot expand, and its run; nothing to queue."""
    # The error already names the map step: it is the run's error as it stands.
    if not fail_step(run_id, parent, error=error, was=StepStatus.PENDING, run_error=error):
        raise RuntimeError(f"map step {parent.key} was not pending")
    return []
