"""What every page's layout needs: the user's role and the queue size for the badge in
the navigation (one indexed count; the badge then refreshes itself with htmx)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from runs import roles
from runs.models import Claim
from runs.states import ClaimStatus


def unresolved_count() -> int:
    return Claim.objects.filter(status=ClaimStatus.UNRESOLVED).count()


def layout(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not roles.can_view(user):
        return {"can_view": False, "can_operate": False}
    return {
        "can_view": True,
        "can_operate": roles.can_operate(user),
        "role": roles.role_of(user),
        "queue_size": unresolved_count(),
    }
