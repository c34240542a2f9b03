"""What every page's layout needs: the user's role, the navigation's badges (each an
app's contribution, contributions.py: the reconciliation queue's size is one indexed
count; the badge then refreshes itself with htmx), and how stale a page read from a
replica is."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from runs import roles

from . import contributions


def layout(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not roles.can_view(user):
        return {"can_view": False, "can_operate": False}
    return {
        "can_view": True,
        "can_operate": roles.can_operate(user),
        "role": roles.role_of(user),
        **contributions.badges(),
        "replica_lag": replica_lag(request),
    }


def replica_lag(request: HttpRequest) -> float | None:
    """How far behind the replica this page was read from is, when far enough to say
    (RUNS_REPLICA_LAG_SHOWN_SECONDS); None for a page read from the primary."""
    lag = getattr(request, "replica_lag", None)
    if lag is None or lag < settings.RUNS_REPLICA_LAG_SHOWN_SECONDS:
        return None
    return float(lag)
