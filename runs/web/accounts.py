"""Login and logout on the product's own pages (not the admin's): a username and
password (unless LOCAL_LOGIN=0), single sign-on (runs/web/sso.py) when configured.

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
from urllib.parse import urlencode

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.crypto import salted_hmac

from runs.web import sso

log = logging.getLogger("durable_runs.auth")


class LoginView(auth_views.LoginView):
    """The username and password form (unless LOCAL_LOGIN=0) and the single sign-on
    button (when OIDC_ISSUER is set): runs/web/sso.py."""

    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context["local_login"] = settings.LOCAL_LOGIN
        if sso.enabled():
            query = urlencode({"next": context.get("next") or ""})
            context["sso_url"] = f"{reverse('oidc_authentication_init')}?{query}"
            context["provider_name"] = settings.OIDC_PROVIDER_NAME
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.LOCAL_LOGIN:
            # The form is not shown; a password sent anyway is not checked.
            log.warning("password login refused: LOCAL_LOGIN is off")
            return render(
                request,
                self.template_name,
                {**self.get_context_data(), "local_login_refused": True},
                status=403,
            )
        response: HttpResponse = super().post(request, *args, **kwargs)
        return response


class LogoutView(auth_views.LogoutView):
    """Ends the session here and, for a session that came from the provider, at the
    provider too when it offers RP-initiated logout (it sends the person back to the
    login page)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get("oidc_id_token")
        response: HttpResponse = super().post(request, *args, **kwargs)
        if id_token is not None:
            url = sso.end_session_url(request, id_token)
            if url is not None:
                return HttpResponseRedirect(url)
        return response


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

    def is_whitelisted(self, request: Any, credentials: dict[str, Any] | None = None) -> bool:
        # The callback of a single sign-on: the provider checked the password (and
        # throttles its own); a refusal here is not a guess, and an address locked out
        # for password failures may still sign in there (runs/web/sso.py).
        if getattr(request, "sso_callback", False):
            return True
        return bool(super().is_whitelisted(request, credentials))

    def user_login_failed(
        self, sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
    ) -> None:
        super().user_login_failed(sender, credentials, request=request, **kwargs)
        if request is None or getattr(request, "sso_callback", False):
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
