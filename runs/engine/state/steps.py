"""Two step edges (docs/architecture.md#where-each-transition-lives).

step → failed, for good, without what follows for its run: everyone calls
state/run.fail_step, which adds the run's follow-up (it fails, or compensates). Only
state/stopped.py calls step_to_failed directly: the run it settles has stopped already,
and failing it again would settle it again.

step → queued, from wherever it may start again (pending with its dependencies done,
waiting and woken, running and crashed, unresolved and decided failed, failed and
retried, a compensation whose predecessor is done): step_to_queued. Its follow-up, the
step's message published after commit, is the caller's, since several steps queued in
one transaction are published together."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q
from django.db.models.functions import Now

from runs.models import Attempt, Step
from runs.record import events
from runs.states import StepStatus

from .unresolved import close_claims_on_give_up


def step_to_failed(
    run_id: uuid.UUID,
    step: Step,
    *,
    error: str,
    was: str | None,
    owned_by: Attempt | None = None,
    attempt_number: int | None = None,
    maybe_applied: bool = False,
    **columns: Any,
) -> bool:
    """The conditional UPDATE `was` → failed (`columns` set with it; `owned_by`: only
    while that attempt owns the step), the step's in-flight claims closed (`failed`, or
    `abandoned` for an idempotent effect that `maybe_applied`), and its `step_failed`
    event. `was=None`: the caller's own statement already moved the step (the fast twins
    in attempts/finish.sql). False, writing nothing, if the step was no longer `was`."""
    if was is not None:
        owned = Step.objects.filter(pk=step.id, status=was)
        if owned_by is not None:
            owned = owned.filter(current_attempt=owned_by)
        if owned.update(status=StepStatus.FAILED, error=error, finished_at=Now(), **columns) != 1:
            return False
    close_claims_on_give_up(run_id=run_id, step=step, error=error, maybe_applied=maybe_applied)
    events.append_event(
        run_id,
        events.StepFailed(step=step.key, error=error),
        step_id=step.id,
        attempt_number=attempt_number,
    )
    return True


def step_to_queued(
    run_id: uuid.UUID,
    step_id: int,
    key: str,
    *,
    was: str | None,
    reason: str | None = None,
    only_if: Q | None = None,
    **columns: Any,
) -> bool:
    """The conditional UPDATE `was` → queued (queued_at now; `columns` set with it;
    `only_if`: further conditions on the row), and its `step_queued` event, with `reason`
    when it is queued again rather than for the first time. `was=None`: the caller's own
    statement already made the step queued (a new row, or the dependents' fast twin in
    state/ready.sql). False, writing nothing, if the step was no longer `was`."""
    if was is not None:
        row = Step.objects.filter(pk=step_id, status=was)
        if only_if is not None:
            row = row.filter(only_if)
        if row.update(status=StepStatus.QUEUED, queued_at=Now(), **columns) != 1:
            return False
    events.append_event(run_id, events.StepQueued(step=key, reason=reason), step_id=step_id)
    return True
