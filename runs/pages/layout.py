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

# Which navigation link a page is under, by (app, URL name); the rest of the runs app
# is under Runs, the queue's pages under Reconciliation.
NAV = {
    ("runs", "overview"): "overview",
    ("runs", "workers"): "workers",
    ("runs", "pauses"): "pauses",
    ("runs", "pause"): "pauses",
    ("runs", "resume"): "pauses",
    ("runs", "reports"): "reports",
    ("runs", "report_csv"): "reports",
}


def nav_here(request: HttpRequest) -> str:
    """The navigation link of the page being answered ('' for none: the admin, login)."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return ""
    if match.app_name == "reconciliation":
        return "reconciliation"
    return NAV.get((match.app_name, match.url_name), "runs" if match.app_name == "runs" else "")


def layout(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not roles.can_view(user):
        return {"can_view": False, "can_operate": False}
    return {
        "can_view": True,
        "can_operate": roles.can_operate(user),
        "role": roles.role_of(user),
        "nav_here": nav_here(request),
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
