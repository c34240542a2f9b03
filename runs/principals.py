"""Who acts on a run: the principal that submitted it (recorded on the run) and what a
signaller may do (runs/engine/policies/waits.py). Plain data below the engine, so the
engine, the API, the pages, the command line and schedules share one rule
(docs/api.md, "Roles").

A principal is a name and the way it came in:
- a person or a service account: `user:<username>`, via `page`, `api-token` or
  `api-session`;
- the command line: `user:<username>` via `cli` with `submit_run --actor`, else `cli`;
- a schedule: `schedule:<name>`, on behalf of the people who made and changed it;
- a direct call into the engine (tests, scripts): the empty principal;
- the engine acting on its own: `engine:<what>`, only `engine:breaker` so far (a step
  paused by its breaker, runs/engine/policies/breaker.py).
Usernames cannot contain ':', so `user:cli` (a user named cli) is not `cli`, and no
person can be `engine:breaker`.
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
    # The people a machine submits for (Run.on_behalf_of): a schedule's creator and
    # whoever last changed it or what it submits. Approvals are separation of duties, so
    # none of them may approve a run it fires (policies/waits.py, docs/api.md#principals).
    on_behalf_of: tuple[str, ...] = ()

    @classmethod
    def of_user(cls, user: Any, via: str) -> Principal:
        """A signed-in person or service account, come in `via` a page or the API."""
        return cls(user_principal(user.get_username()), via)

    @classmethod
    def cli(cls, user: Any = None) -> Principal:
        """`manage.py submit_run`: the account named by --actor, or `cli` (nobody in
        particular) without one."""
        if user is None:
            return cls("cli", "cli")
        return cls(user_principal(user.get_username()), "cli")

    @classmethod
    def schedule(cls, name: str, people: tuple[str, ...] = ()) -> Principal:
        """The schedule `name`, firing on behalf of `people` (its makers and changers)."""
        return cls(f"schedule:{name}", "schedule", tuple(sorted({p for p in people if p})))

    def answerable(self) -> set[str]:
        """Everyone who may not approve what this principal submits."""
        return {p for p in (self.name, *self.on_behalf_of) if p}


NOBODY = Principal("")

# Who pauses a step when its breaker trips (Pause.actor, PauseChange.actor).
ENGINE_BREAKER = "engine:breaker"
# The actor the engine's own decisions are recorded under: a run ended at its deadline
# (policies/deadlines.py), the compensations of a failure. Usernames are recorded as
# they are, so a person named engine is told apart only by the events' other fields.
ENGINE = "engine"


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
    """The name an action is recorded under: a user's username or the given string,
    stripped. Raises InvalidResolution when it is empty (every action needs an actor)."""
    name = actor if isinstance(actor, str) else actor.get_username()
    name = name.strip()
    if not name:
        raise InvalidResolution("a resolution needs an actor (a user or a name)")
    return name
