"""Roles (docs/api.md#roles), as Django groups created by a data migration.

- operators: view everything, take and resolve claims, cancel and retry runs;
- viewers: read only;
- submitters: service accounts that submit runs and read their own runs and the
  workflows through the API (no pages, no claims queue, no decisions); a signal only
  where the wait allows submitters.

Deny by default: a page needs a login AND a role; every POST checks the role on the
server, whatever the page showed. Superusers count as operators.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django_htmx.http import HttpResponseClientRedirect

OPERATORS = "operators"
VIEWERS = "viewers"
SUBMITTERS = "submitters"
ROLES = (OPERATORS, VIEWERS, SUBMITTERS)

User = AbstractBaseUser | AnonymousUser

# What operators may do in the admin (/admin/): manage retention policies and
# schedules, read the policies' audit and the purges. Granted to their group by
# migrations 0013 and 0015 and again by grant_operator_permissions() whenever someone
# is made an operator (a database flushed or restored without it still ends right).
OPERATOR_ADMIN_PERMISSIONS = {
    "retentionpolicy": ("view", "add", "change", "delete"),
    "retentionpolicychange": ("view",),
    "retentionpurge": ("view",),
    "schedule": ("view", "add", "change", "delete"),
}


def grant_operator_permissions(group: Any) -> None:
    from django.contrib.auth.models import Permission

    codenames = [f"{a}_{m}" for m, actions in OPERATOR_ADMIN_PERMISSIONS.items() for a in actions]
    group.permissions.add(
        *Permission.objects.filter(content_type__app_label="runs", codename__in=codenames)
    )


def _groups(user: Any) -> set[str]:
    if not user.is_authenticated:
        return set()
    cached = getattr(user, "_role_names", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        user._role_names = cached
    return cached


def can_operate(user: Any) -> bool:
    return bool(user.is_authenticated and (user.is_superuser or OPERATORS in _groups(user)))


def can_view(user: Any) -> bool:
    return can_operate(user) or VIEWERS in _groups(user)


def can_submit(user: Any) -> bool:
    return can_operate(user) or SUBMITTERS in _groups(user)


def can_read_runs(user: Any) -> bool:
    """Runs and workflows: every role reads them (a submitter follows its own runs)."""
    return can_view(user) or can_submit(user)


def reads_own_runs_only(user: Any) -> bool:
    """A submitter (a service account) reads the runs it submitted, not other
    principals' (their inputs, operators' notes and names); viewers and operators read
    every run."""
    return can_submit(user) and not can_view(user)


def role_of(user: Any) -> str | None:
    if can_operate(user):
        return OPERATORS
    if can_view(user):
        return VIEWERS
    if can_submit(user):
        return SUBMITTERS
    return None


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
