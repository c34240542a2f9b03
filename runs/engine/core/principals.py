"""Who acts on a run: the principal that submitted it (recorded on the run) and what a
signaller may do (policies/waits.py). The engine decides these rules, so the API, the
pages, the command line and schedules share them (docs/api.md, "Roles").

A principal is a name and the way it came in:
- a person or a service account: `user:<username>`, via `page`, `api-token` or
  `api-session`;
- the command line: `cli`; a schedule: `schedule:<name>`;
- a direct call into the engine (tests, scripts): the empty principal.
Usernames cannot contain ':', so `user:cli` (a user named cli) is not `cli`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from runs.errors import InvalidResolution

VIAS = ("page", "api-token", "api-session", "cli", "schedule", "")
SHOWN_VIA = {
    "page": "web page",
    "api-token": "API token",
    "api-session": "API, signed in",
    "cli": "command line",
    "schedule": "schedule",
}


@dataclass(frozen=True)
class Principal:
    name: str
    via: str = ""

    @classmethod
    def of_user(cls, user: Any, via: str) -> Principal:
        return cls(user_principal(user.get_username()), via)

    @classmethod
    def cli(cls) -> Principal:
        return cls("cli", "cli")

    @classmethod
    def schedule(cls, name: str) -> Principal:
        return cls(f"schedule:{name}", "schedule")


NOBODY = Principal("")


def user_principal(name: str) -> str:
    """The principal of a person or service account named `name`."""
    return f"user:{name}"


def shown(submitted_by: str, via: str = "") -> str:
    """A principal as the pages show it: `sam (API token)`, `schedule nightly`."""
    if not submitted_by:
        return "not recorded"
    kind, _, name = submitted_by.partition(":")
    who = name if kind == "user" else submitted_by.replace(":", " ", 1)
    how = SHOWN_VIA.get(via)
    return f"{who} ({how})" if how and kind == "user" else who


def actor_name(actor: AbstractBaseUser | str) -> str:
    name = actor if isinstance(actor, str) else actor.get_username()
    name = name.strip()
    if not name:
        raise InvalidResolution("a resolution needs an actor (a user or a name)")
    return name
