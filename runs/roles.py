"""Roles (docs/api.md#roles), as Django groups created by a data migration.

- operators: view everything, take and resolve claims, cancel and retry runs;
- viewers: read only;
- submitters: service accounts that submit runs and read their own runs and the
  workflows through the API (no pages, no claims queue, no decisions); a signal only
  where the wait allows submitters.

Deny by default: a page needs a login AND a role; every POST checks the role on the
server, whatever the page showed. Superusers count as operators.

This module only answers "may this user ...?", for the engine (who may send a signal),
the pages and the API alike; the pages' decorators that act on the answer (a login
redirect, a 403) are runs/pages/access.py.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

OPERATORS = "operators"
VIEWERS = "viewers"
SUBMITTERS = "submitters"
ROLES = (OPERATORS, VIEWERS, SUBMITTERS)

User = AbstractBaseUser | AnonymousUser

# What operators may do in the admin (/admin/): manage retention policies, schedules and
# the overrides of limits, rates and breakers, read their audits and the purges. Granted
# to their group by migrations 0013, 0015, 0036, 0037 and 0039 (runs/migrations/_grants.py)
# and again by grant_operator_permissions() whenever someone is made an operator (a
# database flushed or restored without it still ends right).
OPERATOR_ADMIN_PERMISSIONS = {
    "retentionpolicy": ("view", "add", "change", "delete"),
    "retentionpolicychange": ("view",),
    "retentionpurge": ("view",),
    "schedule": ("view", "add", "change", "delete"),
    "breakersetting": ("view", "add", "change", "delete"),
    "breakerchange": ("view",),
    "limitsetting": ("view", "add", "change", "delete"),
    "limitchange": ("view",),
    "ratesetting": ("view", "add", "change", "delete"),
    "ratechange": ("view",),
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
