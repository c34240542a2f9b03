"""Login and logout on the product's own pages (not the admin's).

Failed logins are throttled by django-axes (settings.AXES_*) per client address
(config/clientip.py), never per username alone: a username is paused only for the
address its failures came from, and an address that fails for many usernames is paused
for all of them. The lockout page says which, and for how long. Each failed login is
logged once with the client's address and a keyed hash of the username (the username
itself may be a password typed in the wrong field); `manage.py username_hash NAME`
gives the hash of a name to look for.
"""

from __future__ import annotations

import logging
from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.crypto import salted_hmac

log = logging.getLogger("durable_runs.auth")


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    pass


def username_hash(username: str | None) -> str:
    """The same for the same name in one deployment (keyed by SECRET_KEY), so failures
    against one account can be followed in the logs without the logs naming it."""
    return salted_hmac("durable_runs.accounts.username_hash", username or "").hexdigest()[:16]


class LoginAttemptHandler(AxesDatabaseHandler):
    """axes' database handler, plus a limit per address over all usernames.

    axes compares one count with AXES_FAILURE_LIMIT: the failures of this (username,
    address) pair, raised to that limit once the address's failures for any username
    reach AXES_ADDRESS_FAILURE_LIMIT. A success resets its own pair only
    (AXES_LOCKOUT_PARAMETERS), so an attacker cannot clear the address's count by
    logging in to an account of her own in between guesses.
    """

    def get_failures(self, request: Any, credentials: dict[str, Any] | None = None) -> int:
        pair = int(super().get_failures(request, credentials))
        recent = AccessAttempt.objects.filter(
            ip_address=request.axes_ip_address,
            attempt_time__gte=get_cool_off_threshold(request),
        ).aggregate(n=Sum("failures_since_start"))["n"]
        request.axes_address_locked = (recent or 0) >= settings.AXES_ADDRESS_FAILURE_LIMIT
        if request.axes_address_locked:
            return max(pair, int(settings.AXES_FAILURE_LIMIT))
        return pair

    def user_login_failed(
        self, sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
    ) -> None:
        super().user_login_failed(sender, credentials, request=request, **kwargs)
        if request is None:
            return
        address = request.axes_ip_address
        digest = username_hash(get_client_username(request, credentials))
        failures = getattr(request, "axes_failures_since_start", None)
        locked = bool(getattr(request, "axes_locked_out", False))
        log.warning(
            "login failed from %s for username hash %s (%s recent failures%s)",
            address,
            digest,
            failures if failures is not None else "?",
            "; locked out" if locked else "",
            extra={
                "client_ip": address,
                "username_hash": digest,
                "failures": failures,
                "locked_out": locked,
            },
        )


def client_str(
    username: str | None, ip_address: str, user_agent: str, path_info: Any, request: Any
) -> str:
    """How axes names a client in its own log lines: as ours do."""
    if isinstance(path_info, tuple | list):
        path_info = path_info[0] if path_info else ""
    return (
        f'{{ip_address: "{ip_address}", username_hash: "{username_hash(username)}", '
        f'path_info: "{path_info}"}}'
    )


def locked_out(
    request: HttpRequest, credentials: Any = None, *args: Any, **kwargs: Any
) -> HttpResponse:
    return render(
        request,
        "accounts/locked_out.html",
        {
            "address_locked": bool(getattr(request, "axes_address_locked", False)),
            "failure_limit": settings.AXES_FAILURE_LIMIT,
            "address_failure_limit": settings.AXES_ADDRESS_FAILURE_LIMIT,
            "cooloff_minutes": round(float(settings.AXES_COOLOFF_TIME) * 60),
        },
        status=429,
    )
