"""Concurrency limits and key holds at the start of an attempt
(docs/authoring.md#limits-and-holds; declared in runs/workflows/limits.py).

A limit is a set of numbered slots. The start of an attempt of a limited step, in the
transaction of the start statement (start.py), inserts a row into runs_slot for each of
its scopes; the unique (scope, n) with n below the limit's max is what holds the limit
when two workers start at once, not anything read here. A slot is in use while its
attempt runs; it frees when the attempt ends, however it ends (a finish, a failure, a
timeout, a crash the sweeper recovers), because the next start in the scope deletes the
rows of ended attempts before it takes one. Ending an attempt so writes nothing more,
and a step without a limit pays nothing at all.

A start that finds no slot (or a hold on its key) raises NoSlot: its transaction rolls
back, the step stays queued (or retrying), neither failed nor retried, and `wait()`
records the scope on the step (waiting_for) with an event. Its message is spent, so
whoever frees a slot sends it another: the worker whose attempt ended (hand_over),
the resolution of a held claim, and the sweeper for whatever those missed
(republish_waiting). Oldest first: a start is refused while an older step waits for
the same scope, and a freed slot goes to the oldest waiter.

`wait()` then looks once more, in a new snapshot: a slot freed between the refused
start's snapshot and the mark would otherwise reach nobody (its hand-over read the
waiters before the mark committed). Either the hand-over sees the mark or the second
look sees the freed slot; both may, and a second message is harmless (the start
statement takes a step once).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from django.db import connection, transaction

from runs import sql
from runs.engine.core.locks import lock_run
from runs.engine.core.publish import publish_now
from runs.models import Step
from runs.record import events
from runs.states import AttemptStatus, ClaimStatus, StepStatus
from runs.workflows import registry
from runs.workflows.limits import Scope, scopes_for

log = logging.getLogger(__name__)

SQL = sql.load(__file__)

WAITING = [StepStatus.QUEUED, StepStatus.RETRYING]
# How many held steps one resolution or sweep sends at once per key.
HOLD_BATCH = 200
# How often a start asks again after another start took the number it found free.
TAKE_TRIES = 5


class NoSlot(Exception):
    """The attempt may not start now: `scope` is full (`in_use` of its max) or held."""

    def __init__(self, scope: Scope, in_use: int) -> None:
        self.scope = scope
        self.in_use = in_use
        what = (
            f"held: {in_use} unresolved claim(s) on {scope.hold}"
            if scope.hold is not None
            else f"waiting for a slot of {scope.text} ({in_use} of {scope.max} in use)"
        )
        super().__init__(what)


class RateLater(NoSlot):
    """The attempt may not start yet: its rate's next turn is `wait` seconds away.
    `reserved`: the step already holds that turn (its message came early)."""

    def __init__(self, scope: Scope, wait: float, *, reserved: bool) -> None:
        self.wait = wait
        self.reserved = reserved
        super().__init__(scope, 0)
        self.args = (f"put off by its rate {scope.text}: its turn is in {wait:.3f} s",)


def take(step: Step, attempt_id: int, scopes: Iterable[Scope]) -> None:
    """Take a slot of each limit, find each hold clear and take a turn of each rate, in
    the caller's transaction (the start's); raise NoSlot (RateLater for a rate) at the
    first that refuses."""
    queued_at = step.queued_at or step.created_at
    with connection.cursor() as cursor:
        for scope in scopes:
            if scope.interval is not None:
                _turn(cursor, step, scope)
                continue
            if scope.hold is not None:
                held = _held(cursor, scope.hold)
                if held:
                    raise NoSlot(scope, held)
                continue
            cursor.execute(
                SQL["release_ended"], {"scope": scope.text, "running": AttemptStatus.RUNNING}
            )
            for _ in range(TAKE_TRIES):
                cursor.execute(
                    SQL["take"],
                    {
                        "scope": scope.text,
                        "max": scope.max,
                        **_declared_by(scope),
                        "step": step.id,
                        "attempt": attempt_id,
                        "queued_at": queued_at,
                        "waiting": WAITING,
                    },
                )
                looked_free, taken = cursor.fetchone()
                if taken is not None:
                    break
                if not looked_free:
                    raise _full(scope)
            else:
                raise _full(scope)
        if step.waiting_for or step.rate_due_at is not None:
            cursor.execute(SQL["clear_waiting"], {"step": step.id})


def _turn(cursor: Any, step: Step, scope: Scope) -> None:
    """A start under a rate: a turn the step reserved earlier lets it pass once it has
    come (the start statement's time, step.started_at, is the database's clock); else
    it takes the scope's next turn, which must be now."""
    due, now = step.rate_due_at, step.started_at
    if due is not None and now is not None and not hasattr(now, "resolve_expression"):
        if due <= now:
            return
        raise RateLater(scope, (due - now).total_seconds(), reserved=True)
    cursor.execute(
        SQL["reserve"], {"scope": scope.text, "interval": scope.interval, **_declared_by(scope)}
    )
    wait = float(cursor.fetchone()[0])
    if wait > 0:
        raise RateLater(scope, wait, reserved=False)


def wait(step_id: int, refused: NoSlot) -> None:
    """Record that the step waits for `refused.scope` (once per scope: an event and the
    step's waiting_for), then look again whether it may start now (the module's
    docstring says why), and send it if so. A step over its rate is put off to a turn
    of its own instead (put_off)."""
    if isinstance(refused, RateLater):
        put_off(step_id, refused)
        return
    scope = refused.scope
    with transaction.atomic():
        step = Step.objects.filter(pk=step_id).only("run_id").first()
        if step is None:
            return
        lock_run(step.run_id)  # the run before its steps (core/locks.py), for the event
        with connection.cursor() as cursor:
            cursor.execute(
                SQL["mark_waiting"], {"step": step_id, "scope": scope.text, "waiting": WAITING}
            )
            row = cursor.fetchone()
        if row is not None:
            key, run_id = row
            events.append_event(
                run_id,
                events.StepWaitingForSlot(
                    step=key, scope=scope.text, in_use=refused.in_use, of=scope.max
                ),
                step_id=step_id,
            )
    log.info("step %s %s", step_id, refused)
    hand_over([scope])


def put_off(step_id: int, refused: RateLater) -> None:
    """Give the step a turn of its own on its rate's clock (one turn per step, so a
    thousand steps over a rate come back one by one at its pace, not all at once) and
    send its message for then. A step whose turn is reserved already (its message came
    before it) is sent again for what remains."""
    wait_seconds: float | None = refused.wait
    if not refused.reserved:
        scope = refused.scope
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(SQL["lock_step"], {"step": step_id})
            cursor.execute(
                SQL["put_off"],
                {
                    "step": step_id,
                    "scope": scope.text,
                    "interval": scope.interval,
                    **_declared_by(scope),
                    "waiting": WAITING,
                },
            )
            row = cursor.fetchone()
            wait_seconds = None if row is None else float(row[0])
    if wait_seconds is None:
        return  # no longer waiting (started or stopped meanwhile)
    log.info("step %s %s", step_id, refused)
    publish_now([step_id], countdown=wait_seconds)


def in_use(scope: Scope) -> tuple[int, int | None]:
    """How many of the scope's slots are in use now (their attempt runs) and its max
    now (an operator's override, else the declared one); for a hold, how many
    unresolved claims hold its key (and None)."""
    with connection.cursor() as cursor:
        if scope.hold is not None:
            return _held(cursor, scope.hold), None
        cursor.execute(
            SQL["in_use"],
            {
                "scope": scope.text,
                "running": AttemptStatus.RUNNING,
                "max": scope.max,
                **_declared_by(scope),
            },
        )
        used, most = cursor.fetchone()
        return int(used), int(most)


def _full(scope: Scope) -> NoSlot:
    used, most = in_use(scope)
    return NoSlot(replace(scope, max=most), used)


def _declared_by(scope: Scope) -> dict[str, str]:
    workflow, step, per = scope.declared_by
    return {"workflow": workflow, "step_name": step, "per": per}


def hand_over(scopes: Iterable[Scope]) -> list[int]:
    """Send the oldest steps waiting for each scope a message, as many as it has free
    slots (for a hold: all of them, in batches, once no claim holds the key): one
    statement per scope. Called after a commit that may have freed one; returns the
    steps sent."""
    sent: list[int] = []
    with connection.cursor() as cursor:
        for scope in scopes:
            if scope.interval is not None:
                continue  # a rate's steps come back at their own turns (put_off)
            if scope.hold is not None:
                cursor.execute(
                    SQL["oldest_held"],
                    {
                        "scope": scope.text,
                        "waiting": WAITING,
                        "hold": scope.hold,
                        "unresolved": ClaimStatus.UNRESOLVED,
                        "limit": HOLD_BATCH,
                    },
                )
            else:
                cursor.execute(
                    SQL["oldest_waiting"],
                    {
                        "scope": scope.text,
                        "waiting": WAITING,
                        "max": scope.max,
                        **_declared_by(scope),
                        "running": AttemptStatus.RUNNING,
                    },
                )
            ids = [row[0] for row in cursor.fetchall()]
            if ids:
                publish_now(ids)
                sent += ids
    return sent


def republish_waiting(*, limit: int = 200) -> list[int]:
    """The sweeper's pass: hand over every scope some step waits for (a worker killed
    before its hand-over, a slot freed by a crash the sweeper recovered). A scope no
    definition declares any more releases its steps to the ordinary republish."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["waiting_scopes"], {"waiting": WAITING, "limit": limit})
        rows = cursor.fetchall()
    sent: list[int] = []
    for text, _step_id, workflow, version, name, run_input in rows:
        scope = _declared(text, workflow, version, name, run_input)
        if scope is None:
            with connection.cursor() as cursor:
                cursor.execute(SQL["forget_scope"], {"scope": text, "waiting": WAITING})
            continue
        sent += hand_over([scope])
    return sent


def _declared(text: str, workflow: str, version: int, name: str, run_input: Any) -> Scope | None:
    wf = registry.get(workflow, version)
    stepdef = wf.stepdef(name) if wf is not None else None
    if wf is None or stepdef is None:
        return None
    if isinstance(run_input, str):  # jsonb as text on Django's connections
        run_input = json.loads(run_input)
    for scope in scopes_for(wf, stepdef, run_input or {}):
        if scope.text == text:
            return scope
    return None


def _held(cursor: Any, hold: str) -> int:
    cursor.execute(SQL["held"], {"hold": hold, "unresolved": ClaimStatus.UNRESOLVED})
    return int(cursor.fetchone()[0])
