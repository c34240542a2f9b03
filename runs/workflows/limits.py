"""Concurrency limits and key holds, as a workflow declares them
(docs/authoring.md#limits-and-holds); the engine enforces them in
runs/engine/attempts/slots.py.

    wf = workflow("merge-change", input={"change_id": int}, limit=Limit(max=20))

    @wf.step(kind=GUARDED, limit=[Limit(max=5), Limit(per="change_id", max=1)],
             hold="change_id")
    def merge(ctx): ...

A limit is a number of slots: at most `max` attempts hold one at once, where "at once"
means their attempts are running (a crashed attempt's slot frees when the sweeper
recovers its lease). `per` names an input field: one set of slots per value of it.
A hold names an input field too: while a claim of a step that declared the same hold
field is unresolved for a value, no new attempt of such a step starts for that value,
in any run, until a person (or a probe) decides the claim.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .errors import WorkflowDefinitionError

# A scope's text is stored on a waiting step and in runs_slot; an input value longer
# than this is cut (its digest keeps two long values apart).
VALUE_MAX = 200


@dataclass(frozen=True, kw_only=True)
class Limit:
    """At most `max` attempts running at once; with `per`, at most `max` per value of
    that input field (`Limit(per="change_id", max=1)`: one at a time per change)."""

    max: int
    per: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.max, bool) or not isinstance(self.max, int) or self.max < 1:
            raise WorkflowDefinitionError(
                f"Limit(max=...) must be a positive int, not {self.max!r}"
            )
        if self.per is not None and (not isinstance(self.per, str) or not self.per.strip()):
            raise WorkflowDefinitionError(
                f"Limit(per=...) must name an input field, not {self.per!r}"
            )

    def describe(self) -> str:
        return f"{self.max} at once" + (f" per {self.per}" if self.per else "")


@dataclass(frozen=True, kw_only=True)
class Rate:
    """At most `starts` attempt starts every `every` seconds, spaced evenly (20 a second:
    one every 50 ms); with `per`, that many per value of the input field. Counted in
    PostgreSQL for all workers together, never per worker process."""

    starts: int
    every: float = 1.0
    per: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.starts, bool) or not isinstance(self.starts, int) or self.starts < 1:
            raise WorkflowDefinitionError(
                f"Rate(starts=...) must be a positive int, not {self.starts!r}"
            )
        every = self.every.total_seconds() if isinstance(self.every, timedelta) else self.every
        if isinstance(every, bool) or not isinstance(every, int | float) or not every > 0:
            raise WorkflowDefinitionError(
                f"Rate(every=...) must be a positive number of seconds, not {self.every!r}"
            )
        object.__setattr__(self, "every", float(every))
        if self.per is not None and (not isinstance(self.per, str) or not self.per.strip()):
            raise WorkflowDefinitionError(
                f"Rate(per=...) must name an input field, not {self.per!r}"
            )

    @property
    def interval(self) -> float:
        """Seconds between two starts."""
        return self.every / self.starts


def rate_of(rate: Rate | None, where: str) -> Rate | None:
    if rate is not None and not isinstance(rate, Rate):
        raise WorkflowDefinitionError(f"{where}: rate= takes a Rate(...), not {rate!r}")
    return rate


def limits_of(limit: Limit | Sequence[Limit] | None, where: str) -> tuple[Limit, ...]:
    """A step's `limit=` as a tuple: one Limit, a list of them, or None (none)."""
    if limit is None:
        return ()
    found = tuple(limit) if isinstance(limit, list | tuple) else (limit,)
    for one in found:
        if not isinstance(one, Limit):
            raise WorkflowDefinitionError(f"{where}: limit= takes Limit(...) values, not {one!r}")
    pers = [one.per for one in found]
    if len(set(pers)) != len(pers):
        raise WorkflowDefinitionError(
            f"{where}: two limits with the same per= ({pers}); declare one per field"
        )
    return found


def check_fields(names: Sequence[str | None], declared: Mapping[str, Any], where: str) -> None:
    """Every `per`/`hold` field is a declared input field (when the workflow declares
    its fields; a pydantic input is checked when a run's input is read)."""
    if not declared:
        return
    for name in names:
        if name is not None and name not in declared:
            raise WorkflowDefinitionError(
                f"{where}: {name!r} is not a declared input field "
                f"(declared: {', '.join(sorted(declared)) or 'none'})"
            )


def keyed(field: str, run_input: Mapping[str, Any]) -> str:
    """`field=value` for a run's input: the part of a scope a `per` or a hold adds. A
    missing field is `field=null` (every such run shares it)."""
    value = json.dumps(run_input.get(field), sort_keys=True, separators=(",", ":"))
    if len(value) > VALUE_MAX:
        value = value[: VALUE_MAX - 17] + "~" + hashlib.sha256(value.encode()).hexdigest()[:16]
    return f"{field}={value}"


@dataclass(frozen=True)
class Scope:
    """One set of slots a start must take (a limit: `max` set), or one key hold a start
    must find clear (`hold` set, the claims' hold_key). `text` names it in runs_slot and
    on a waiting step; scopes are taken in the order of their text, so two starts that
    share two scopes cannot each hold one the other waits for."""

    text: str
    max: int | None = None
    hold: str | None = None
    # A rate: seconds between two starts in the scope.
    interval: float | None = None
    # A limit's or a rate's declaration, which an operator's override names
    # (runs.LimitSetting, runs.RateSetting):
    # its workflow, its step ('' for the workflow's own) and its per field ('' if none).
    declared_by: tuple[str, str, str] = ("", "", "")


def scopes_for(workflow: Any, stepdef: Any, run_input: Mapping[str, Any]) -> tuple[Scope, ...]:
    """The scopes an attempt of `stepdef` takes, for a run with this input: its
    workflow's limit, its own limits, its hold. Empty for a step that declares none
    (the start then does nothing more)."""
    limit = workflow.limit
    if (
        limit is None
        and workflow.rate is None
        and not stepdef.limits
        and stepdef.hold is None
        and stepdef.rate is None
    ):
        return ()
    found: list[Scope] = []
    if limit is not None:
        found.append(
            Scope(
                _text(f"workflow {workflow.name}", limit, run_input),
                limit.max,
                declared_by=(workflow.name, "", limit.per or ""),
            )
        )
    for owner, step_name, rate in (
        (f"workflow {workflow.name}", "", workflow.rate),
        (f"step {workflow.name}.{stepdef.name}", stepdef.name, stepdef.rate),
    ):
        if rate is not None:
            text = _text(f"rate {owner}", rate, run_input)
            by = (workflow.name, step_name, rate.per or "")
            found.append(Scope(text, interval=rate.interval, declared_by=by))
    for one in stepdef.limits:
        found.append(
            Scope(
                _text(f"step {workflow.name}.{stepdef.name}", one, run_input),
                one.max,
                declared_by=(workflow.name, stepdef.name, one.per or ""),
            )
        )
    if stepdef.hold is not None:
        key = keyed(stepdef.hold, run_input)
        found.append(Scope(f"hold {key}", hold=key))
    return tuple(sorted(found, key=lambda scope: scope.text))


def _text(owner: str, limit: Limit | Rate, run_input: Mapping[str, Any]) -> str:
    return owner if limit.per is None else f"{owner} {keyed(limit.per, run_input)}"
