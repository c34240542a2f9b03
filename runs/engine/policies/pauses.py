"""Pausing and resuming a workflow, or one step name of it
(docs/operating.md#pause-and-resume).

A pause is a row of runs_pause; the start statement (attempts/start.sql) refuses to
start a step while a pause of its run's workflow ('' step: all of it) or of its step's
definition name stands, so every way into an attempt (a message, a successor started in
its predecessor's finish, a batch, the sweeper's republish) meets the same check. What
already runs finishes and is recorded; probes and waits take no attempt and go on.

Pausing and resuming each write the pause row and an audit row (PauseChange) in one
transaction. They touch no run's rows (docs/architecture.md#locks): a pause inserts its
row; a resume locks its workflow's pause rows (in id order), deletes its own, then
reads the waiting steps a pause turned away without locks and publishes them after its
commit, spread out at RUNS_RESUME_RATE messages a second. Only those: a delivery the
pause refused marks its step (held_at, mark_held), since its message is gone; a step
whose message is still queued gets it after the resume, and a second message for each
would double a backlog (bench/backlog.py measured 1,345 extra messages on a queue of
about 2,400 after a 10 s pause). The lock makes two resumes of one workflow take
turns: each reads the steps in a snapshot of its own, and two at once (the workflow's
pause and a step's) would each see the other's pause standing and leave the steps both
held with no message; the second to come now reads after the first's commit.

The spread sends some messages with a countdown of minutes; each step's message_due_at
says when its message is due (on the database's clock), and the sweeper counts its
republish bound from then, so it does not send again a message still on its way.
queued_at is left alone: since when the step waits. A step the spread could not reach
within RUNS_MAX_COUNTDOWN_SECONDS stays queued for the sweeper, which republishes it
as a lost message (nothing waits for ever).

Keyed by the workflow's name: a pause holds every version of it. Pausing what is
already paused is refused (AlreadyPaused), so its first who and why stand.

The engine pauses a step itself when its breaker trips (pause_by_breaker, called by
policies/breaker.py): the same row and audit row, by `engine:breaker`; a pause already
standing is no refusal there, the trip simply finds the step paused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction

from runs import sql
from runs.engine.core.publish import bounded, publish_now
from runs.engine.state.run import ACTIVE, COMPENSATING
from runs.errors import (
    AlreadyPaused,
    NotPaused,
    PauseReasonRequired,
    UnknownStep,
    UnknownWorkflow,
)
from runs.models import Pause, PauseChange
from runs.principals import ENGINE_BREAKER, actor_name
from runs.states import StepStatus
from runs.workflows import registry

log = logging.getLogger(__name__)

SQL = sql.load(__file__)

WAITING = [StepStatus.QUEUED, StepStatus.RETRYING]


@dataclass(frozen=True)
class Resumed:
    """A resume: the pause it ended, its audit row, and the steps it republished."""

    pause: Pause
    change: PauseChange
    republished: list[int]


@dataclass(frozen=True)
class Holding:
    """The pause that holds a step (what the careful start path and the pages say)."""

    pause_id: int
    step: str
    actor: str
    reason: str


def step_names(workflow: str) -> list[str]:
    """Every step name of every version of the workflow (compensations included), in
    declaration order: what a pause of one step may name. An unknown workflow has
    none (an empty list); raises nothing."""
    names: dict[str, None] = {}
    for version in registry.versions(workflow):
        wf = registry.get(workflow, version)
        if wf is not None:
            names.update(dict.fromkeys([*wf.steps, *wf.compensations]))
    return list(names)


def _checked(workflow: str, step: str, reason: str, action: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise PauseReasonRequired(action)
    if not registry.versions(workflow):
        raise UnknownWorkflow(workflow, sorted({wf.name for wf in registry.all_workflows()}))
    if step:
        known = step_names(workflow)
        if step not in known:
            raise UnknownStep(workflow, step, known)
    return reason


def pause(*, workflow: str, step: str = "", actor: AbstractBaseUser | str, reason: str) -> Pause:
    """Pause a workflow (`step` ''), or one step name of it: from this commit on, no
    attempt of it starts. Refuses: PauseReasonRequired, UnknownWorkflow, UnknownStep,
    AlreadyPaused; nothing is written then."""
    workflow, step = (workflow or "").strip(), (step or "").strip()
    reason = _checked(workflow, step, reason, "pause")
    who = actor_name(actor)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                SQL["insert_pause"],
                {"workflow": workflow, "step": step, "actor": who, "reason": reason},
            )
            row = cursor.fetchone()
        if row is None:
            standing = Pause.objects.get(workflow=workflow, step=step)
            raise AlreadyPaused(
                _what(workflow, step), standing.actor, standing.created_at, standing.reason
            )
        PauseChange.objects.create(
            action=PauseChange.Action.PAUSE,
            workflow=workflow,
            step=step,
            actor=who,
            reason=reason,
            pause_id=row[0],
        )
    log.info("paused %s by %s: %s", _what(workflow, step), who, reason)
    return Pause(
        id=row[0], workflow=workflow, step=step, actor=who, reason=reason, created_at=row[1]
    )


def resume(*, pause_id: int, actor: AbstractBaseUser | str, reason: str) -> Resumed:
    """End a pause and republish what waited behind it (after the commit, at a bounded
    rate). Refuses: PauseReasonRequired, NotPaused (never made, or resumed already);
    nothing is written then."""
    reason = (reason or "").strip()
    if not reason:
        raise PauseReasonRequired("resume")
    who = actor_name(actor)
    with transaction.atomic():
        with connection.cursor() as cursor:
            # The resumes of one workflow take turns (docs/architecture.md#locks).
            cursor.execute(SQL["lock_pauses"], {"pause": pause_id})
            cursor.execute(SQL["delete_pause"], {"pause": pause_id})
            row = cursor.fetchone()
            if row is None:
                raise NotPaused(pause_id)
            workflow, step = row
            rate = float(settings.RUNS_RESUME_RATE)
            reach = max(1, int(rate * float(settings.RUNS_MAX_COUNTDOWN_SECONDS)))
            cursor.execute(
                SQL["waiting_behind"],
                {
                    "waiting": WAITING,
                    "workflow": workflow,
                    "step": step,
                    "active": ACTIVE,
                    "compensating": COMPENSATING,
                    "limit": reach,
                },
            )
            ids = [r[0] for r in cursor.fetchall()]
            delays = _spread(len(ids), rate)
            if ids:
                cursor.execute(SQL["mark_due"], {"ids": ids, "delays": delays, "waiting": WAITING})
        change = PauseChange.objects.create(
            action=PauseChange.Action.RESUME,
            workflow=workflow,
            step=step,
            actor=who,
            reason=reason,
            republished=len(ids),
            pause_id=pause_id,
        )
        transaction.on_commit(lambda: _publish_spread(ids, delays))
    log.info(
        "resumed %s by %s (%d step(s) republished): %s",
        _what(workflow, step),
        who,
        len(ids),
        reason,
    )
    ended = Pause(id=pause_id, workflow=workflow, step=step, actor=who, reason=reason)
    return Resumed(pause=ended, change=change, republished=ids)


def pause_by_breaker(
    *, workflow: str, step: str, reason: str, counts: dict[str, Any]
) -> Pause | None:
    """The engine's own pause of one step name, when its breaker trips
    (policies/breaker.py): the same row and audit row as a person's pause, by
    `engine:breaker`, with the counts it tripped on kept on the audit row (`breaker`),
    which the webhook announces. A pause of that step already standing (a person's, or
    a concurrent trip's: the unique (workflow, step) makes the second insert wait for
    the first and then do nothing) is left as it is: None, nothing written."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                SQL["insert_pause"],
                {"workflow": workflow, "step": step, "actor": ENGINE_BREAKER, "reason": reason},
            )
            row = cursor.fetchone()
        if row is None:
            return None
        PauseChange.objects.create(
            action=PauseChange.Action.PAUSE,
            workflow=workflow,
            step=step,
            actor=ENGINE_BREAKER,
            reason=reason,
            pause_id=row[0],
            breaker=counts,
        )
    log.warning("paused %s by its breaker: %s", _what(workflow, step), reason)
    return Pause(
        id=row[0],
        workflow=workflow,
        step=step,
        actor=ENGINE_BREAKER,
        reason=reason,
        created_at=row[1],
    )


def _spread(count: int, rate: float) -> list[float]:
    """The countdown of each of `count` messages sent at `rate` a second, oldest step
    first: a second's worth of them together, the i-th after i/rate seconds, never
    longer than RUNS_MAX_COUNTDOWN_SECONDS (publish.bounded). What the messages are sent
    with, and what the steps' message_due_at records."""
    per = max(1, int(rate))
    return [bounded((i - i % per) / rate) or 0.0 for i in range(count)]


def _publish_spread(step_ids: list[int], delays: list[float]) -> None:
    """One message per step, each with its countdown: a resume of thousands of waiting
    steps does not hand the workers (and the code host they call) all of them at once."""
    for delay, group in groupby(zip(step_ids, delays, strict=True), key=lambda pair: pair[1]):
        publish_now([step_id for step_id, _ in group], countdown=delay or None)


def mark_held(step_id: int) -> None:
    """A pause turned the step's delivery away: its message is gone from the broker, so
    the resume must send it again (and only such steps: one whose message is still
    queued gets it after the resume). A resume that read the steps between this
    delivery's refusal and this write leaves the step to the sweeper, which republishes
    it as a lost message."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["mark_held"], {"step_id": step_id, "waiting": WAITING})


def holding(step_id: int) -> Holding | None:
    """The pause that holds this step, if one stands now."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["holding"], {"step_id": step_id})
        row: Any = cursor.fetchone()
    return Holding(*row) if row is not None else None


def _what(workflow: str, step: str) -> str:
    return f"step {step!r} of workflow {workflow!r}" if step else f"workflow {workflow!r}"
