"""An attempt's lease: every write an attempt makes is fenced on it, on the
database's clock. A finish that loses its lease raises AttemptFenced and its
transaction, effect included, rolls back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import F, Value
from django.db.models.functions import Least, Now

from runs.engine.core.clock import db_now_plus
from runs.errors import AttemptFenced
from runs.models import Attempt
from runs.states import AttemptStatus


def fence(attempt_id: int, status: AttemptStatus, error: str = "") -> None:
    """Move a live attempt to its final status, or raise AttemptFenced."""
    n = Attempt.objects.filter(
        pk=attempt_id, status=AttemptStatus.RUNNING, lease_expires_at__gt=Now()
    ).update(status=status, finished_at=Now(), error=error)
    if n != 1:
        raise AttemptFenced(f"attempt {attempt_id} no longer owns its step")


def renew_lease(
    attempt_id: int,
    seconds: float,
    *,
    until: float | None = None,
    entering_effect: bool = False,
) -> None:
    """Heartbeat: extend a live lease, or raise AttemptFenced if it was lost.
    `until`: seconds after the attempt's start past which the lease never runs (its
    timeout and grace, core/clock.kill_after), so a step that keeps calling heartbeat
    cannot keep its step for ever. `entering_effect`: the guarded step's function is
    called next; the same conditional UPDATE records it (policies/recover.py retries a
    crashed attempt that never got here)."""
    lease: Any = db_now_plus(seconds)
    if until is not None:
        lease = Least(lease, F("started_at") + Value(timedelta(seconds=until)))
    fields: dict[str, Any] = {"lease_expires_at": lease}
    if entering_effect:
        fields["effect_entered_at"] = Now()
    n = Attempt.objects.filter(
        pk=attempt_id, status=AttemptStatus.RUNNING, lease_expires_at__gt=Now()
    ).update(**fields)
    if n != 1:
        raise AttemptFenced(f"attempt {attempt_id} lost its lease")
