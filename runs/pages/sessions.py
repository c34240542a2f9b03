"""How long a login lasts.

A login ends SESSION_ABSOLUTE_HOURS after it began, however busy (the session's own
expiry, set at login: the database row and the cookie both end then), and after
SESSION_IDLE_MINUTES without a request from the person. The pages poll on their own
(the queue badge every 5 s, live parts of the overview and of a run): those requests
do not count as activity, or an open tab would keep its login forever.

The last activity is the login time (in the session, written with the login) or, once
the person made a request, a cookie signed for this session that carries its time. A
cookie rather than the session: the session would be written back to the database on
every page view. A client can drop the cookie (the login time counts then) or replay an
older one; it cannot make one newer than its last request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.signals import user_logged_in
from django.core import signing
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone

log = logging.getLogger("durable_runs.auth")

LOGIN_AT = "login_at"
ACTIVITY_COOKIE = "last_activity"
# The ids of the elements that poll (`data-poll` in templates/): htmx names the
# element that triggered a request in HX-Trigger.
POLL_ELEMENTS = frozenset(
    {"queue-badge", "overview-live", "run-live", "workers-live", "incident-groups"}
)


@receiver(user_logged_in)
def start(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    if request is None or not hasattr(request, "session"):
        return
    lifetime = timedelta(hours=settings.SESSION_ABSOLUTE_HOURS)
    request.session.set_expiry(timezone.now() + lifetime)
    request.session[LOGIN_AT] = int(time.time())


def is_poll(request: HttpRequest) -> bool:
    """A request the page made on its own, not the person."""
    if request.headers.get("HX-Request") != "true":
        return False
    return (
        request.path == reverse("reconciliation:badge")
        or request.headers.get("HX-Trigger") in POLL_ELEMENTS
    )


def _signer(session_key: str) -> signing.Signer:
    # Salted with the session's key: a cookie of one login means nothing to another.
    return signing.get_cookie_signer(salt=f"{ACTIVITY_COOKIE}:{session_key}")


def activity_cookie(session_key: str, at: int) -> str:
    """The cookie's value saying the person made a request at `at` (epoch seconds)."""
    return _signer(session_key).sign(str(at))


def last_activity(request: HttpRequest) -> int | None:
    session = request.session
    login_at = session.get(LOGIN_AT)
    if not isinstance(login_at, int) or session.get("_session_expiry") is None:
        return None  # a login from before logins had a lifetime
    given = request.COOKIES.get(ACTIVITY_COOKIE)
    if given and session.session_key:
        try:
            return max(login_at, int(_signer(session.session_key).unsign(given)))
        except (signing.BadSignature, ValueError):
            pass
    return login_at


class SessionLifetimeMiddleware:
    """Ends a login that was idle too long (or began before logins had a lifetime) and
    records the person's activity. After the authentication and message middleware."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.user.is_authenticated and hasattr(request, "session"):
            self._check(request)
        response = self.get_response(request)
        if request.user.is_authenticated and hasattr(request, "session"):
            if not is_poll(request) and request.session.session_key:
                response.set_cookie(
                    ACTIVITY_COOKIE,
                    activity_cookie(request.session.session_key, int(time.time())),
                    max_age=int(settings.SESSION_IDLE_MINUTES * 60),
                    secure=settings.SESSION_COOKIE_SECURE,
                    httponly=True,
                    samesite=settings.SESSION_COOKIE_SAMESITE,
                )
        elif ACTIVITY_COOKIE in request.COOKIES:
            response.delete_cookie(ACTIVITY_COOKIE, samesite=settings.SESSION_COOKIE_SAMESITE)
        return response

    def _check(self, request: HttpRequest) -> None:
        last = last_activity(request)
        now = int(time.time())
        if last is None:
            log.info("session ended: it began before logins had a lifetime")
            self._end(request, "Your session has ended. Please log in again.")
        elif now - last >= settings.SESSION_IDLE_MINUTES * 60:
            log.info("session ended: idle for %d minutes", (now - last) // 60)
            minutes = f"{settings.SESSION_IDLE_MINUTES:g}"
            self._end(request, f"You were signed out after {minutes} minutes without activity.")

    def _end(self, request: HttpRequest, message: str) -> None:
        logout(request)
        messages.info(request, message)
