"""The roles of runs/roles.py, per endpoint. Deny by default: an action a view does
not list is refused, and so is a user with no role.

| endpoint                         | viewer | submitter | operator |
|----------------------------------|--------|-----------|----------|
| runs: list, detail, steps, events| yes    | own runs  | yes      |
| runs: submit                     | -      | yes       | yes      |
| runs: cancel, retry a step       | -      | -         | yes      |
| runs: send a signal              | -      | if its wait allows submitters, own runs | yes (1) |
| claims: list                     | yes    | -         | yes      |
| claims: take, release, resolve   | -      | -         | yes      |
| pauses: list                     | yes    | -         | yes      |
| pauses: pause, resume            | -      | -         | yes      |
| workflows, schema, docs          | yes    | yes       | yes      |

(1) A wait declares who may send its signal (operators by default); an approval
(`four_eyes`) must come from someone other than the run's submitter. The engine decides
(runs/engine/policies/waits.py), so the pages and the API agree.

Anonymous callers get 401 (with WWW-Authenticate: Token), users without the role 403.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from runs import roles

Check = Callable[[Any], bool]

READ_RUNS: tuple[Check, str] = (roles.can_read_runs, "viewer, submitter or operator")
READ_CLAIMS: tuple[Check, str] = (roles.can_view, "viewer or operator")
SUBMIT: tuple[Check, str] = (roles.can_submit, "submitter or operator")
OPERATE: tuple[Check, str] = (roles.can_operate, "operator")
# Batches are read as the claims are: by viewers and operators (operators alone act).
READ_BATCHES = READ_CLAIMS


class SignedInRequest(Request):
    """A request RolePermission let through to an action: its `user` is a user, never the
    anonymous one. Only a type: DRF builds the request, nothing makes one of these, and the
    bare annotation adds nothing to Request at run time."""

    user: User


class RolePermission(BasePermission):
    """The view's `roles` maps each action to the (check, role names) it needs."""

    message = "this needs a role"

    def has_permission(self, request: Any, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False  # DRF answers 401: not authenticated
        action = getattr(view, "action", None)
        if action in (None, "metadata"):
            return True  # no handler for the method (OPTIONS included): DRF answers 405 next
        needed = getattr(view, "roles", {}).get(action)
        if needed is None:
            self.message = "this action is not open to any role"
            return False
        check, names = needed
        if check(request.user):
            return True
        self.message = f"this needs the {names} role"
        return False


class AnyRole(BasePermission):
    """The API's schema and docs: any of the three roles."""

    message = f"this needs the {READ_RUNS[1]} role"

    def has_permission(self, request: Any, view: Any) -> bool:
        return bool(request.user and roles.can_read_runs(request.user))
