"""Conditions (`when=` on a step): decided when the step's dependencies are
done, inside the transaction that found it ready."""

from __future__ import annotations

import traceback
import uuid

from runs.models import Run, Step
from runs.states import StepStatus
from runs.workflows.definition import StepDef

from .results import context_for
from .run import fail_step


def condition_holds(run_id: uuid.UUID, step: Step, stepdef: StepDef) -> bool | None:
    """Evaluate the step's condition with a context of the run's input and results.
    None if it raised: then the step has failed (pending → failed, with its event)
    and so has the run, since a condition that cannot be decided cannot be guessed."""
    assert stepdef.when is not None
    run_input = Run.objects.values_list("input", flat=True).get(pk=run_id)
    try:
        return bool(stepdef.when(context_for(run_id, dict(run_input), step.name)))
    except Exception as exc:  # the definition's own code
        error = (
            "its condition raised "
            + "".join(traceback.format_exception_only(type(exc), exc)).strip()
        )
        fail_step(run_id, step, error=error, was=StepStatus.PENDING)
        return None
