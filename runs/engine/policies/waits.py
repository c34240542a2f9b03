"""Durable waits: wait steps that wait for a named signal, sleep steps that
wait for a time, the sweeper's timer wake-ups, and send_signal().

A wait step holds no worker. When its message is delivered (the step is `queued`),
reach_wait() decides in one transaction, with the step's row locked: consume a signal
that was kept for it (the step succeeds with the payload), end it because its time
has come (timeout: fail or continue; sleep: succeed), or park it `waiting` with a
`wake_at` on the database's clock. It is woken (waiting → queued, then delivered
again) by send_signal() or by the sweeper (wake_due()), each a conditional UPDATE
`… WHERE status = 'waiting'`, so of two wakers exactly one wakes it.

Lost wake-ups are excluded by lock order (locks.py): send_signal() and reach_wait()
both lock the run row first, then the wait step rows; send_signal() inserts its signal
and reach_wait() looks for one only under those locks. Whichever comes second waits for
the first to commit, then sees its work: the signal (reach_wait) or the step `waiting`
(send_signal, which then wakes it). The run row first is also the order of a step's
finish, which locks the run and then its dependents (a wait among them): a signal sent
early never deadlocks with it.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, Value
from django.db.models.functions import Now

from runs import sql
from runs.engine.core.jsonvalues import ensure_json
from runs.engine.core.locks import lock_run
from runs.engine.core.publish import publish_on_commit
from runs.engine.core.versions import workflow_of
from runs.engine.state.ready import succeed_step
from runs.engine.state.results import context_for
from runs.engine.state.run import active_run, fail_step, start_run
from runs.engine.state.steps import step_to_queued
from runs.errors import (
    DuplicateSignal,
    RunNotActive,
    RunNotFound,
    SignalNotAllowed,
    UnknownSignal,
    WaitFinished,
)
from runs.models import Run, Signal, Step
from runs.principals import actor_name, shown, user_principal
from runs.record import events
from runs.roles import can_operate, can_submit
from runs.states import RUN_ACTIVE, RunStatus, StepStatus
from runs.workflows import registry
from runs.workflows.definition import SIGNALLING_ROLES, StepDef, WaitSpec, Workflow

SQL = sql.load(__file__)

log = logging.getLogger(__name__)


def reach_wait(*, step_id: int, workflow: Workflow, stepdef: StepDef) -> str:
    """The wait or sleep step `step_id` was delivered: end it or park it (see the
    module's docstring). Returns a word for the logs."""
    spec = stepdef.wait
    assert spec is not None
    with transaction.atomic():
        owner = Step.objects.filter(pk=step_id).values_list("run_id", flat=True).first()
        run = lock_run(owner) if owner is not None else None
        if run is None or run.status not in RUN_ACTIVE:
            return "skipped"  # the run is no longer active
        step = (
            Step.objects.select_for_update(of=("self",))
            .filter(pk=step_id, status=StepStatus.QUEUED)
            .order_by()
            .first()
        )
        if step is None:
            return "skipped"  # a duplicate delivery
        run_id: uuid.UUID = run.id
        start_run(run_id)
        if spec.signal is not None:
            signal = _consume(run_id, spec.signal, step)
            if signal is not None:
                _succeed(step, workflow, {**signal, "timed_out": False})
                return "signalled"
            if step.wake_at is None and spec.timeout is not None:
                _set_wake_at(step, Now() + Value(spec.timeout))
            elif _due(step):
                if spec.on_timeout == "continue":
                    _succeed(step, workflow, {"timed_out": True})
                    return "timed out, continued"
                _fail(step, f"no signal {spec.signal!r} before its timeout ({spec.timeout})")
                return "timed out, failed"
        else:
            if step.wake_at is None:
                try:
                    deadline = _deadline(step, stepdef)
                except Exception as exc:  # the definition's own code
                    _fail(step, f"its deadline could not be computed: {exc!r}")
                    return "failed"
                _set_wake_at(step, deadline)
            if _due(step):
                assert step.wake_at is not None
                _succeed(step, workflow, {"slept_until": step.wake_at.isoformat()})
                return "slept"
        _park(step, spec.signal)
        return "waiting"


def _deadline(step: Step, stepdef: StepDef) -> Any:
    """The sleep's end, from the definition's function: a datetime, or a timedelta
    counted from the database's now()."""
    assert stepdef.wait is not None and stepdef.wait.deadline is not None
    run = Run.objects.only("id", "input").get(pk=step.run_id)
    ctx = context_for(run.id, dict(run.input), step.name)
    value = stepdef.wait.deadline(ctx)
    if isinstance(value, timedelta):
        return Now() + Value(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value
    raise TypeError(
        f"sleep step {step.name!r}: its deadline must be a timedelta or an aware datetime, "
        f"got {value!r}"
    )


def _set_wake_at(step: Step, wake_at: Any) -> None:
    Step.objects.filter(pk=step.id).update(wake_at=wake_at)
    step.refresh_from_db(fields=["wake_at"])


def _due(step: Step) -> bool:
    return step.wake_at is not None and Step.objects.filter(pk=step.id, wake_at__lte=Now()).exists()


def _consume(run_id: uuid.UUID, name: str, step: Step) -> dict[str, Any] | None:
    """Take the oldest unconsumed signal `name` of the run for this step."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["consume_signal"], {"step": step.id, "run": run_id, "name": name})
        row = cursor.fetchone()
    if row is None:
        return None
    signal_id, payload, actor = row
    if isinstance(payload, str):  # Django's psycopg set-up reads jsonb as its text
        payload = json.loads(payload)
    events.append_event(
        run_id, events.SignalConsumed(step=step.key, signal=name, id=signal_id), step_id=step.id
    )
    return {"payload": payload, "actor": actor}


def _succeed(step: Step, workflow: Workflow, result: Any) -> None:
    ready = succeed_step(
        step.run_id,
        step,
        workflow,
        was=StepStatus.QUEUED,
        result=ensure_json(result),
        started_at=Now(),
    )
    publish_on_commit(ready, fault_step=step.name)


def _fail(step: Step, error: str) -> None:
    if not fail_step(step.run_id, step, error=error, was=StepStatus.QUEUED, started_at=Now()):
        raise RuntimeError(f"wait step {step.key} was not queued")


def _park(step: Step, signal: str | None) -> None:
    """queued → waiting; the run waits too if it was running."""
    n = Step.objects.filter(pk=step.id, status=StepStatus.QUEUED).update(status=StepStatus.WAITING)
    if n != 1:
        raise RuntimeError(f"wait step {step.key} was not queued")
    step.refresh_from_db(fields=["wake_at"])
    events.append_event(
        step.run_id,
        events.StepWaiting(
            step=step.key, signal=signal, wake_at=step.wake_at.isoformat() if step.wake_at else None
        ),
        step_id=step.id,
    )
    if Run.objects.filter(pk=step.run_id, status=RunStatus.RUNNING).update(
        status=RunStatus.WAITING, updated_at=Now()
    ):
        events.append_event(step.run_id, events.RunWaiting(step=step.key))


def _wake(step_id: int, run_id: uuid.UUID, key: str, reason: str) -> bool:
    """waiting → queued: the step's edge, then the run back to running when no step of
    it waits any more, the message after commit. False, writing nothing, if the step
    was no longer waiting."""
    if not step_to_queued(run_id, step_id, key, was=StepStatus.WAITING, reason=reason):
        return False
    still_waiting = Exists(Step.objects.filter(run_id=OuterRef("pk"), status=StepStatus.WAITING))
    if (
        Run.objects.filter(pk=run_id, status=RunStatus.WAITING)
        .exclude(still_waiting)
        .update(status=RunStatus.RUNNING, updated_at=Now())
    ):
        events.append_event(run_id, events.RunWoken(step=key, reason=reason))
    publish_on_commit([step_id])
    return True


def wait_step() -> Q | None:
    """`The step is a wait or a sleep`, for the workflows this process knows, by its
    run's workflow and version (a step of a version it does not know is taken for no
    wait); None if none of them has one. What a pause never holds (recover.paused_step):
    a wait takes no attempt, its delivery reaches the wait whatever pauses stand."""
    found: Q | None = None
    for wf in registry.all_workflows():
        names = [name for name, stepdef in wf.steps.items() if stepdef.is_wait]
        if not names:
            continue
        of_it = Exists(
            Run.objects.filter(pk=OuterRef("run_id"), workflow=wf.name, version=wf.version)
        )
        waits = Q(of_it, name__in=names, parent__isnull=True)
        found = waits if found is None else found | waits
    return found


# --- the sweeper's timers -------------------------------------------------------------
def wake_due(*, limit: int = 200, only: Q | None = None) -> list[int]:
    """Wake waiting steps whose `wake_at` has come, on the database's clock. Each in
    its own transaction (a sweep never holds two runs' rows), by a conditional UPDATE
    on a row taken with SKIP LOCKED: two sweepers (two beats) wake a timer once. `only`
    limits it to some runs (the sweep's swept_runs)."""
    candidates = list(
        Step.objects.filter(active_run(), status=StepStatus.WAITING, wake_at__lte=Now())
        .filter(only if only is not None else Q())
        .order_by("wake_at")
        .values_list("id", "run_id")[:limit]
    )
    woken: list[int] = []
    for step_id, run_id in candidates:
        with transaction.atomic():
            # The run first (locks.py), skipped if another sweeper or a signal holds it:
            # the next sweep comes back to it.
            run = lock_run(run_id, skip_locked=True)
            if run is None or run.status not in RUN_ACTIVE:
                continue
            row = (
                Step.objects.select_for_update(of=("self",))
                .filter(pk=step_id, status=StepStatus.WAITING, wake_at__lte=Now())
                .order_by()
                .values_list("run_id", "key")
                .first()
            )
            if row is None:
                continue  # woken already
            took = _wake(step_id, row[0], row[1], "timer due")
            assert took, "we hold the row and saw it waiting"
            woken.append(step_id)
    return woken


# --- signals --------------------------------------------------------------------------
def send_signal(
    *, run_id: uuid.UUID | str, name: str, payload: Any = None, actor: AbstractBaseUser | str
) -> Signal:
    """Send the signal `name` to a run, with its actor, as an event. If the run's wait
    for it is waiting, it is woken in the same transaction (its message goes out after
    commit); if the run has not reached the wait yet, the signal is kept for it.

    Refuses, changing nothing: RunNotFound; RunNotActive (finished); UnknownSignal (no
    wait of the run's workflow listens for `name`); SignalNotAllowed (the actor is not
    among the wait's `signalled_by`, or the wait is `four_eyes` and the actor submitted
    the run or is among those a schedule submitted it for, Run.on_behalf_of);
    DuplicateSignal (a signal of that name was already received and the wait
    says `on_duplicate="refuse"`, whether or not the wait took the first: 409
    `duplicate_signal` through the API); WaitFinished (every wait for `name` ended: it
    timed out, was skipped by its `when=`, or took the signals it queues; 409
    `wait_finished` through the API)."""
    who = actor_name(actor)
    payload = ensure_json(payload, "signal payload")
    with transaction.atomic():
        run = (
            Run.objects.filter(pk=run_id)
            .only("id", "workflow", "version", "submitted_by", "on_behalf_of")
            .first()
        )
        if run is None:
            raise RunNotFound(run_id)
        workflow = workflow_of(run, doing=f"tell which of its steps wait for signal {name!r}")
        waits = workflow.waits_for(name)
        if not waits:
            raise UnknownSignal(run.id, name, workflow.signals())
        assert waits[0].wait is not None  # waits_for() returns wait steps
        _check_signaller(run, name, waits[0].wait, actor)
        # Lock order (locks.py): the run, then its wait steps in id order.
        run = Run.objects.select_for_update(of=("self",)).get(pk=run.id)
        if run.status not in RUN_ACTIVE:
            raise RunNotActive(run, f"sent signal {name!r}")
        steps = list(
            Step.objects.select_for_update(of=("self",))
            .filter(run_id=run.id, name__in=[w.name for w in waits], parent__isnull=True)
            .order_by("id")
        )
        on_duplicate = waits[0].wait.on_duplicate
        # A second signal of a name its wait takes once is a duplicate, also once the
        # wait took the first (it ended, but "already received" says more than "no
        # longer waits"). Signals are inserted only under the run row's lock, which we
        # hold: this read is exact, and the insert's unique index is the backstop.
        if on_duplicate == "refuse":
            _refuse_duplicate(run.id, name)
        if steps and all(s.status in _WAIT_ENDED for s in steps):
            raise WaitFinished(run.id, name, _how_waits_ended(steps))
        signal_id = _insert_signal(run.id, name, payload, who, on_duplicate)
        if signal_id is None:
            _refuse_duplicate(run.id, name)
            raise RuntimeError(f"signal {name!r} of run {run.id} was neither inserted nor found")
        events.append_event(
            run.id, events.SignalReceived(signal=name, actor=who, payload=payload, id=signal_id)
        )
        for step in steps:
            if step.status != StepStatus.WAITING:
                continue
            if _wake(step.id, run.id, step.key, f"signal {name!r} from {who}"):
                break  # one signal wakes one wait; the woken step consumes it
    return Signal.objects.get(pk=signal_id)


def _refuse_duplicate(run_id: uuid.UUID, name: str) -> None:
    """Raise DuplicateSignal if the run already received a signal `name`."""
    first = Signal.objects.filter(run_id=run_id, name=name).order_by("id").first()
    if first is not None:
        raise DuplicateSignal(run_id, name, first.actor, first.created_at)


@dataclass(frozen=True)
class SignalRefusal:
    """Why an actor may not send a signal: `why` is "role" (its roles are not among the
    wait's `signalled_by`), "submitted" (an approval, and the actor submitted the run)
    or "on_behalf" (an approval, and the actor made or changed the schedule that
    submitted it); `message` is the engine's sentence (SignalNotAllowed's)."""

    why: Literal["role", "submitted", "on_behalf"]
    message: str
    signalled_by: tuple[str, ...] = ()


def signal_refusal(run: Run, name: str, actor: AbstractBaseUser | str) -> SignalRefusal | None:
    """Why send_signal() would refuse `actor` the signal `name` of `run` for who sends
    it (SignalNotAllowed), or None: the one rule, which the run page asks before it
    offers the signal, so it never offers what the engine refuses. Reads no lock and no
    step: whether the run still waits is send_signal's to say. A name no wait of the
    run's workflow listens for is None too (send_signal says UnknownSignal)."""
    workflow = registry.get(run.workflow, run.version)
    waits = workflow.waits_for(name) if workflow is not None else []
    if not waits or waits[0].wait is None:
        return None
    return _signaller_refusal(run, name, waits[0].wait, actor)


def _check_signaller(run: Run, name: str, spec: WaitSpec, actor: AbstractBaseUser | str) -> None:
    """Refuse (SignalNotAllowed) an actor the wait does not accept (_signaller_refusal)."""
    refusal = _signaller_refusal(run, name, spec, actor)
    if refusal is not None:
        raise SignalNotAllowed(refusal.message)


def _signaller_refusal(
    run: Run, name: str, spec: WaitSpec, actor: AbstractBaseUser | str
) -> SignalRefusal | None:
    """Why the wait does not accept the actor, or None: its roles are not among
    `signalled_by`, or the wait is an approval (`four_eyes`) and the actor submitted
    the run, or made or changed the schedule that fired it.

    An actor given by name that is an account's username is that account, checked by
    its roles as the pages and the API check a person: a script (or the command line,
    which signs with an account) cannot pass a viewer's or a service account's name for
    an operator's. A name that is no account's is the engine's own caller (a test, the
    in-process harness): it may send any signal, four eyes still apply."""
    if isinstance(actor, str):
        actor = _account_named(actor.strip()) or actor
    if isinstance(actor, str):
        roles = set(SIGNALLING_ROLES)
        who = actor.strip()
    else:
        roles = {"operators"} if can_operate(actor) else set()
        if can_submit(actor):
            roles.add("submitters")
        if not actor.is_active:  # a disabled account has no role left
            roles = set()
        who = actor.get_username()
    if not roles & set(spec.signalled_by):
        return SignalRefusal(
            "role",
            f"signal {name!r} of run {run.id} is sent by {' or '.join(spec.signalled_by)} "
            f"only; {who} may not send it",
            tuple(spec.signalled_by),
        )
    if spec.four_eyes and run.submitted_by == user_principal(who):
        return SignalRefusal(
            "submitted",
            f"signal {name!r} is an approval: it needs someone other than {who}, who "
            f"submitted run {run.id}",
        )
    if spec.four_eyes and user_principal(who) in run.on_behalf_of:
        return SignalRefusal(
            "on_behalf",
            f"signal {name!r} is an approval: it needs someone other than {who}, who made "
            f"or changed {shown(run.submitted_by)}, which submitted run {run.id}",
        )
    return None


def _account_named(username: str) -> AbstractBaseUser | None:
    model = get_user_model()
    return model.objects.filter(**{model.USERNAME_FIELD: username}).first()


# A wait step in one of these can no longer consume a signal.
_WAIT_ENDED = (StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED)


def _how_waits_ended(steps: list[Step]) -> str:
    said = []
    for step in steps:
        if step.status == StepStatus.SKIPPED:
            said.append(f"{step.key} was skipped by its condition")
        elif step.status == StepStatus.FAILED:
            said.append(f"{step.key} failed ({step.error})")
        elif isinstance(step.result, dict) and step.result.get("timed_out"):
            said.append(f"{step.key} timed out and went on without it")
        else:
            said.append(f"{step.key} already took its signal")
    return "; ".join(said)


def _insert_signal(
    run_id: uuid.UUID, name: str, payload: Any, actor: str, on_duplicate: str
) -> int | None:
    """INSERT the signal; None if signal_one_per_name_when_refused already holds one."""
    params: dict[str, Any] = {
        "run": run_id,
        "name": name,
        "payload": json.dumps(payload),
        "actor": actor,
        "on_duplicate": on_duplicate,
    }
    with connection.cursor() as cursor:
        cursor.execute(SQL["insert_signal"], params)
        row = cursor.fetchone()
    return None if row is None else int(row[0])


__all__ = [
    "SignalRefusal",
    "reach_wait",
    "send_signal",
    "signal_refusal",
    "wait_step",
    "wake_due",
]
