"""The pages' door: a view needs a login and a role (runs/roles.py answers which).

Deny by default: without a login, to the login page and back; with the wrong role, 403
(PermissionDenied, the page templates/403.html). Every POST view carries one of these,
whatever the page showed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django_htmx.http import HttpResponseClientRedirect

from runs.roles import can_operate, can_submit, can_view

View = Callable[..., HttpResponse]


def _to_login(request: HttpRequest) -> HttpResponse:
    """To the login page, and back here after it. An htmx request (a poll whose login
    ended) sends the whole page there: the login form is not swapped into a badge."""
    if request.headers.get("HX-Request") == "true":
        current = urlsplit(request.headers.get("HX-Current-URL", ""))
        page = current.path + (f"?{current.query}" if current.query else "")
        login = redirect_to_login(page or request.get_full_path())
        return HttpResponseClientRedirect(login["Location"])
    return redirect_to_login(request.get_full_path())


def _requires(check: Callable[[Any], bool], what: str) -> Callable[[View], View]:
    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return _to_login(request)
            if not check(request.user):
                raise PermissionDenied(f"this needs the {what} role")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


viewer_required = _requires(can_view, "viewer or operator")
operator_required = _requires(can_operate, "operator")
submitter_required = _requires(can_submit, "submitter or operator")
