"""What the pages say about concurrency limits and key holds
(docs/authoring.md#limits-and-holds): why a queued step waits ("waiting for a slot (5
of 5 in use)"), each limit's slots in use and waiters for the workers page, and how many
steps an unresolved claim holds. Reads only; the engine's attempts/slots.py writes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from runs.models import Claim, LimitSetting, Run, Slot, Step
from runs.states import AttemptStatus, ClaimStatus, StepStatus
from runs.workflows import registry
from runs.workflows.limits import Scope, scopes_for

WAITING = (StepStatus.QUEUED, StepStatus.RETRYING)
HOLD = "hold "


@dataclass(frozen=True)
class SlotWait:
    """Why a queued step has not started: its limit's scope is full, or its key held."""

    scope: str
    in_use: int
    of: int | None  # the limit's max; None for a hold or a rate
    # A rate's: the turn it reserved for the step (the database's clock).
    turn_at: datetime | None = None

    @property
    def is_hold(self) -> bool:
        return self.of is None and self.turn_at is None

    @property
    def words(self) -> str:
        if self.turn_at is not None:
            return f"put off by its rate until {self.turn_at:%H:%M:%S} UTC"
        if self.of is None:
            key = self.scope.removeprefix(HOLD)
            return f"held: {self.in_use} unresolved claim(s) on {key} wait for a decision"
        return f"waiting for a slot ({self.in_use} of {self.of} in use)"


@dataclass(frozen=True)
class LimitRow:
    """One scope of a limit with slots in use or steps waiting (the workers page)."""

    scope: str
    in_use: int
    of: int | None
    waiting: int


def slot_waits(run: Run, steps: Iterable[Step]) -> dict[int, SlotWait]:
    """For each of the run's steps waiting for a slot or a hold, why, counted now."""
    steps = list(steps)
    found: dict[int, SlotWait] = {
        s.pk: SlotWait("rate", 0, None, turn_at=s.rate_due_at)
        for s in steps
        if s.rate_due_at is not None and s.status in WAITING
    }
    waiting = [s for s in steps if s.waiting_for and s.status in WAITING]
    if not waiting:
        return found
    wf = registry.get(run.workflow, run.version)
    for step in waiting:
        stepdef = wf.stepdef(step.name) if wf is not None else None
        scopes = scopes_for(wf, stepdef, run.input or {}) if stepdef is not None else ()
        scope = next((s for s in scopes if s.text == step.waiting_for), None)
        if scope is not None:
            most = None if scope.hold is not None else _max_now(scope)
            found[step.pk] = SlotWait(scope.text, _in_use(scope), most)
    return found


def holding(hold_key: str) -> int:
    """How many runs have a step waiting for the claims on this hold key to be decided."""
    if not hold_key:
        return 0
    waiting = Step.objects.filter(waiting_for=HOLD + hold_key, status__in=WAITING)
    return waiting.values("run_id").distinct().count()


def limit_rows(rows: Iterable[tuple[str, int, int]]) -> list[LimitRow]:
    """The workers page's rows from (scope, in use, waiting) as runs/web/workers.sql
    counts them, each with its max now (an operator's override, else the declared)."""
    rows = list(rows)
    if not rows:
        return []
    overrides = {(o.workflow, o.step, o.per): o.max for o in LimitSetting.objects.all()}
    found = []
    for scope, used, waiting in rows:
        owner, most = declared(scope)
        found.append(LimitRow(scope, used, overrides.get(owner, most) if owner else most, waiting))
    return found


def _in_use(scope: Scope) -> int:
    if scope.hold is not None:
        return Claim.objects.filter(hold_key=scope.hold, status=ClaimStatus.UNRESOLVED).count()
    return Slot.objects.filter(scope=scope.text, attempt__status=AttemptStatus.RUNNING).count()


def _max_now(scope: Scope) -> int | None:
    """A limit's max now: an operator's override (runs.LimitSetting), else declared."""
    workflow, step, per = scope.declared_by
    override = LimitSetting.objects.filter(workflow=workflow, step=step, per=per).first()
    return override.max if override is not None else scope.max


def declared(scope: str) -> tuple[tuple[str, str, str] | None, int | None]:
    """A scope's declaration (workflow, step, per: what an override names) and its
    declared max (`step wf.name change_id=301`: owner, then the per field's
    `field=value`), from the registered definitions; (None, None) for a hold, or a
    scope no definition declares any more."""
    if scope.startswith(HOLD):
        return None, None
    kind, owner, *rest = scope.split(" ", 2)
    per = rest[0].split("=", 1)[0] if rest else None
    for wf in registry.all_workflows():
        if kind == "workflow" and owner == wf.name and wf.limit and wf.limit.per == per:
            return (wf.name, "", per or ""), wf.limit.max
        for stepdef in wf.steps.values():
            if kind == "step" and owner == f"{wf.name}.{stepdef.name}":
                for limit in stepdef.limits:
                    if limit.per == per:
                        return (wf.name, stepdef.name, per or ""), limit.max
    return None, None
