"""The run's own status: where its steps may go on, and its end (failed, or
compensating first; succeeded)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db.models import Exists, OuterRef
from django.db.models.functions import Now

from runs import sql
from runs.engine.core import definitions
from runs.engine.core.locks import lock_run
from runs.models import Attempt, Run, Step
from runs.record import events
from runs.sql import prepared
from runs.states import RUN_ACTIVE, RunStatus
from runs.workflows.definition import Workflow

from .compensation import begin_compensation
from .steps import step_to_failed
from .stopped import settle_open_effects, stopped_for_good

log = logging.getLogger(__name__)

SQL = sql.load(__file__)


# "The run is active" is RUN_ACTIVE (runs/states.py), the one definition: as a
# correlated EXISTS for the ORM's statements below, and as this text[] parameter for the
# .sql statements that test it (the start, the dependents' counters).
ACTIVE = list(RUN_ACTIVE)
COMPENSATING = [RunStatus.COMPENSATING]


def active_run() -> Exists:
    """`EXISTS (the step's run is active)`: a correlated subquery that keeps an UPDATE
    of runs_step a single-table statement."""
    return Exists(Run.objects.filter(pk=OuterRef("run_id"), status__in=RUN_ACTIVE))


def compensating_run() -> Exists:
    """`EXISTS (the step's run is compensating)`: where compensation steps may start."""
    return Exists(Run.objects.filter(pk=OuterRef("run_id"), status=RunStatus.COMPENSATING))


def run_may_go_on(step: Step) -> Exists:
    """Where this step may start: an active run, or a compensating one for a
    compensation step."""
    return compensating_run() if step.compensates else active_run()


def statuses_going_on(step: Step) -> tuple[str, ...]:
    """The run statuses in which this step may still be retried."""
    return (RunStatus.COMPENSATING,) if step.compensates else RUN_ACTIVE


def start_run(run_id: uuid.UUID) -> bool:
    """The edge run pending → running, with its event: the first step starts (or a wait is
    reached). False, writing nothing, if the run was not pending (it already runs, or it
    stopped before its first step)."""
    with prepared.cursor() as cursor:
        cursor.execute(
            SQL["start"],
            {"run": run_id, "running": RunStatus.RUNNING, "pending": RunStatus.PENDING},
        )
        started: bool = cursor.rowcount == 1
    if started:
        events.append_event(run_id, events.RunStarted())
    return started


def fail_step(
    run_id: uuid.UUID,
    step: Step,
    *,
    error: str,
    was: str | None,
    owned_by: Attempt | None = None,
    attempt_number: int | None = None,
    maybe_applied: bool = False,
    run_error: str | None = None,
    **columns: Any,
) -> bool:
    """The edge step `was` → failed, for good, with everything that follows it: the
    conditional UPDATE, its claims closed and its event (steps.step_to_failed, whose
    parameters these are; `was=None` after a fast twin's own statement), then its run
    fails or compensates (fail_run; `run_error` when the step's error already names the
    run's cause). False, writing nothing, if the step was no longer `was`: whether that
    is a bug is the caller's to say."""
    if not step_to_failed(
        run_id,
        step,
        error=error,
        was=was,
        owned_by=owned_by,
        attempt_number=attempt_number,
        maybe_applied=maybe_applied,
        **columns,
    ):
        return False
    fail_run(
        run_id,
        run_error or f"step {step.key} failed: {error}",
        compensation=bool(step.compensates),
    )
    return True


def fail_run(run_id: uuid.UUID, error: str, *, compensation: bool = False) -> None:
    """A step failed for good: the run fails, or compensates first if steps with a
    compensation have succeeded (state/compensation.py). A compensation that fails
    for good (`compensation=True`) ends its compensating run as failed, naming it.
    Decided under the run row's lock (core/locks.py); a run no longer active is left as it
    is."""
    run = lock_run(run_id)
    if run is None:
        return
    if compensation:
        if run.status == RunStatus.COMPENSATING:
            _run_failed(run_id, error)
        return
    if run.status not in RUN_ACTIVE:
        # A step of a run that had stopped gave up: what it left open is settled now
        # (an effect that may have happened and names a compensation goes to a person).
        if stopped_for_good(run):
            settle_open_effects(run, why=f"the run had {run.status}")
        return
    if begin_compensation(run, ends_as=RunStatus.FAILED, error=error):
        return  # it settled what the plan left open (state/stopped.py)
    _run_failed(run_id, error)


def _run_failed(run_id: uuid.UUID, error: str) -> None:
    """The edge run → failed, under the run's lock (fail_run decided it)."""
    Run.objects.filter(pk=run_id).update(
        status=RunStatus.FAILED, error=error, finished_at=Now(), updated_at=Now()
    )
    events.append_event(run_id, events.RunFailed(error=error))


def succeed_run(run_id: uuid.UUID, workflow: Workflow) -> None:
    """The edge run → succeeded, its result its leaf steps' results (one statement)."""
    with prepared.cursor() as cursor:
        cursor.execute(
            SQL["succeed"],
            {
                "run": run_id,
                "succeeded": RunStatus.SUCCEEDED,
                "from": [RunStatus.RUNNING, RunStatus.NEEDS_RECONCILIATION],
                "leaves": _leaves(workflow),
            },
        )
        n = cursor.rowcount
    if n == 1:
        events.append_event(run_id, events.RunSucceeded())
    else:
        log.info("run %s finished its steps but is no longer running; left as it is", run_id)


def _leaves(workflow: Workflow) -> list[str]:
    """The steps no other step depends on: their results are the run's. Once per
    process per workflow (core/definitions.py)."""
    return definitions.once(
        "leaves", workflow, None, lambda: [s for s in workflow.steps if not workflow.dependents(s)]
    )
