"""Run deadlines (docs/authoring.md#deadlines): a run still active at its deadline
(Run.deadline_at) is ended by the sweep as a cancel would end it, compensations
included, with the engine as its actor.

Two halves, each on the database's clock. The start statement (attempts/start.sql)
refuses a step of a run whose deadline passed, so no step starts past it even before a
sweep comes; a compensation still starts, since the deadline must not block its own
undoing. end_past_deadlines() then ends each such run: in its own transaction, the
run taken FOR UPDATE SKIP LOCKED (locks.py: the cancel's order), its status and
deadline read again under that lock, so two sweepers end a run once, and a run that a
person cancelled meanwhile is left as they left it. An attempt running at the deadline
is not stopped (its step's timeout bounds it): it finishes and is recorded as after a
cancel, and a compensable step that succeeds that way is compensated then
(state/compensation.compensate_late_step).
"""

from __future__ import annotations

import logging
import uuid

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now

from runs.engine.core.locks import lock_run
from runs.errors import WorkflowVersionUnknown
from runs.models import Run
from runs.principals import ENGINE
from runs.record import events
from runs.states import RUN_ACTIVE

from .operate import cancel_locked
from .submit import shown_deadline

log = logging.getLogger(__name__)


def end_past_deadlines(*, limit: int = 200, only: Q | None = None) -> list[uuid.UUID]:
    """End up to `limit` active runs whose deadline passed, soonest deadline first, each
    as cancel_run would (actor `engine`, reason "deadline passed (deadline … UTC)"),
    after a run_deadline_passed event. Returns the ids of the runs it ended. A run
    another transaction holds is left for the next sweep; one whose workflow version
    this process lacks while steps that may need undoing succeeded is left to a
    process that knows it (as a cancel would be refused). `only` limits it to some
    runs (the sweep's swept_runs)."""
    candidates = list(
        Run.objects.filter(
            deadline_at__isnull=False,
            finished_at__isnull=True,
            deadline_at__lte=Now(),
            status__in=RUN_ACTIVE,
        )
        .filter(only if only is not None else Q())
        .order_by("deadline_at")
        .values_list("id", flat=True)[:limit]
    )
    ended: list[uuid.UUID] = []
    for run_id in candidates:
        try:
            if _end(run_id):
                ended.append(run_id)
        except WorkflowVersionUnknown as refused:
            log.info("run %s past its deadline left to a worker that knows it: %s", run_id, refused)
    return ended


def _end(run_id: uuid.UUID) -> bool:
    with transaction.atomic():
        # The run first (locks.py), skipped if another sweeper, a cancel or a signal
        # holds it: the next sweep comes back to it.
        run = lock_run(run_id, skip_locked=True)
        if run is None or run.status not in RUN_ACTIVE or run.deadline_at is None:
            return False
        # Read again under the lock, on the database's clock.
        if not Run.objects.filter(pk=run.id, deadline_at__lte=Now()).exists():
            return False
        deadline = run.deadline_at
        events.append_event(
            run.id, events.RunDeadlinePassed(deadline=deadline.isoformat(), status=run.status)
        )
        cancel_locked(
            run, who=ENGINE, reason=f"deadline passed (deadline {shown_deadline(deadline)})"
        )
        return True
