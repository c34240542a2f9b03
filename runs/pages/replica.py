"""Which reading pages read the replica, and reading one's own writes (runs/sql/routing.py;
docs/operating.md, "A read replica").

`reads_replica` wraps a view: a GET or HEAD reads the replica when one is configured,
answers, and has replayed what this client last wrote; anything else reads the primary.
After a client's request that may have written (any other method), the response sets a
cookie with the primary's WAL position at that moment; until the replica has replayed
that far, the client's reading pages read the primary, so an operator who cancels a run
sees it cancelled on the page the redirect brings, and an API client that sends the
cookie back reads its own submission.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse

from runs.sql import routing

WRITTEN_COOKIE = "dr_written"
LAG_HEADER = "X-Replica-Lag"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")

View = TypeVar("View", bound=Callable[..., Any])


def _written_position(request: HttpRequest) -> int:
    try:
        return int(request.COOKIES.get(WRITTEN_COOKIE, "0"))
    except ValueError:
        return 0


def reads_replica(view: View) -> View:
    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if request.method not in ("GET", "HEAD") or not routing.configured():
            return view(request, *args, **kwargs)
        state = routing.state()
        if state is None or not routing.has_replayed(state, _written_position(request)):
            return view(request, *args, **kwargs)
        # The templates (base.html) say how stale the page is when it matters.
        request.replica_lag = state.lag_seconds  # type: ignore[attr-defined]
        with routing.reading_from(routing.REPLICA):
            response = view(request, *args, **kwargs)
            # A lazily rendered response (DRF's) renders here, still on the replica.
            if hasattr(response, "render") and not getattr(response, "is_rendered", True):
                response.render()
        response[LAG_HEADER] = f"{state.lag_seconds:.3f}"
        return response

    return wrapped  # type: ignore[return-value]


class WrittenPositionMiddleware:
    """Sets WRITTEN_COOKIE after a request that may have written, when a replica is
    configured: the primary's WAL position, which the replica must have replayed before
    this client's reading pages read it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.method in SAFE_METHODS or not routing.configured():
            return response
        try:
            position = routing.primary_position()
        except DatabaseError:
            # The primary is away: this request wrote nothing that could be missed.
            return response
        response.set_cookie(
            WRITTEN_COOKIE,
            str(max(position, _written_position(request))),
            max_age=int(settings.RUNS_REPLICA_WRITTEN_COOKIE_SECONDS),
            httponly=True,
            samesite="Lax",
            secure=settings.SESSION_COOKIE_SECURE,
        )
        return response
