"""What operators do to a run as a whole: cancel it (and, with the timeline issue,
retry a failed step). Each is a conditional transition written with its event, in one
transaction, and records who did it."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models.functions import Now

from runs import events
from runs.models import Run, Step
from runs.states import RUN_ACTIVE, RunStatus, StepStatus

from .errors import RunNotActive, RunNotFound
from .resolve import actor_name


def cancel_run(*, run_id: uuid.UUID | str, actor: AbstractBaseUser | str, reason: str = "") -> Run:
    """Cancel an active run: no new step starts from now on (starting a step requires
    an active run, in the same UPDATE that starts it), attempts already running finish
    and are recorded, but queue nothing after them; the run ends `cancelled`.
    Unresolved claims stay in the reconciliation queue: a decision on them is recorded
    and schedules nothing. Refuses: RunNotFound, RunNotActive."""
    who = actor_name(actor)
    reason = (reason or "").strip()
    error = f"cancelled by {who}" + (f": {reason}" if reason else "")
    with transaction.atomic():
        n = Run.objects.filter(pk=run_id, status__in=RUN_ACTIVE).update(
            status=RunStatus.CANCELLED, error=error, finished_at=Now(), updated_at=Now()
        )
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise RunNotFound(run_id)
        if n != 1:
            raise RunNotActive(run, "cancelled")
        running = list(
            Step.objects.filter(run_id=run.id, status=StepStatus.RUNNING, parent__isnull=True)
            .order_by("id")
            .values_list("key", flat=True)
        )
        events.append_event(
            run.id, events.RUN_CANCELLED, actor=who, reason=reason, still_running=running
        )
    return run


def run_is_active(run_id: Any) -> bool:
    return Run.objects.filter(pk=run_id, status__in=RUN_ACTIVE).exists()
