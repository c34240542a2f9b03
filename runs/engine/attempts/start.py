"""Starting an attempt: one statement moves a queued step to running, creates its
attempt and returns all the attempt needs. A start that cannot decide here (an
unknown workflow, a wait, a takeover) rolls back and leaves it to the careful path
(runs/engine/entry/execute.py), which then runs the same statement."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Model
from django.db.models.base import ModelState

from runs import sql
from runs.engine.core import definitions, faults
from runs.engine.core.clock import kill_after, lease_for, timeout_for
from runs.engine.core.locks import lock_run
from runs.engine.core.publish import publish_now
from runs.engine.state.run import ACTIVE, COMPENSATING, start_run
from runs.errors import ClaimNotTakeable
from runs.models import Attempt, Claim, Run, Step
from runs.ops import tracing
from runs.record import events
from runs.sql import prepared
from runs.states import AttemptStatus, EffectKind, RunStatus, StepStatus
from runs.workflows import registry
from runs.workflows.definition import StepDef, Workflow
from runs.workflows.limits import Scope, scopes_for

from .claims import take_claim
from .lease import renew_lease
from .slots import take as take_slots

log = logging.getLogger(__name__)

SQL = sql.load(__file__)


# Kinds whose claim is taken when the attempt starts (before the effect runs).
CLAIM_AT_START = (EffectKind.IDEMPOTENT, EffectKind.GUARDED)


@dataclass(slots=True)
class LeaseClock:
    """This worker's clock when the attempt's lease was last set (before the statement
    that set it was sent): when a map's item fences renew it (items.py). Never a safety
    decision: whether the lease is held is asked of the database. The one part of a
    started attempt that changes while it runs."""

    seconds: float
    set_at: float = field(default_factory=time.monotonic)

    def renewed(self, at: float) -> None:
        self.set_at = at

    def renewal_due(self) -> bool:
        """A quarter of the lease spent since the start or the last renewal."""
        return time.monotonic() - self.set_at >= self.seconds / 4


@dataclass(frozen=True, slots=True)
class Started:
    """Everything an executing attempt needs, loaded once."""

    step: Step
    run: Run
    attempt: Attempt
    workflow: Workflow
    stepdef: StepDef
    lease: LeaseClock
    claim: Claim | None = None
    # The results of the step's dependencies (ctx.results), when the start read them.
    results: dict[str, Any] | None = None
    # A batch's: its map parent's plan revision (part of its items' claim keys).
    parent_revision: int | None = None
    # The limits and hold it started under (slots.py): handed over when it ends.
    scopes: tuple[Scope, ...] = ()
    # With tracing on: when its start was sent (ns since the epoch), its span's start.
    began_ns: int = 0

    @property
    def lease_seconds(self) -> float:
        return self.lease.seconds

    @property
    def until(self) -> float:
        """Seconds after the attempt's start past which its lease never runs and its
        worker process is replaced: its timeout and grace (core/clock.kill_after)."""
        return kill_after(timeout_for(self.stepdef))

    @property
    def is_batch(self) -> bool:
        return self.step.parent_id is not None


def republish_if_early(step_id: int) -> None:
    """A retry's message can arrive before its time: Celery's countdown runs on the
    worker's clock, `next_attempt_at` on the database's. Send it again with the delay
    that remains on the database's clock, rather than leave the step for the sweeper's
    republish bound."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["early_by"], {"step": step_id, "retrying": StepStatus.RETRYING})
        row = cursor.fetchone()
    if row is not None:
        remaining = max(0.0, float(row[0]))
        log.info("step %s woke %.3fs early; republished for its time", step_id, remaining)
        publish_now([step_id], countdown=remaining)


class NotStartableHere(Exception):
    """The step's workflow (or the step) is unknown to this worker, or the step is a
    wait: roll the start back and let the careful path handle it."""


@dataclass(frozen=True)
class _Layout:
    """Where the step's and the run's columns sit in a row of a start statement
    (`s.*, r.*, ...` or `d.*, r.*, ...`), as each model's from_db() wants them: in its
    fields' order."""

    step_at: tuple[int, ...]
    run_at: tuple[int, ...]
    extras: int

    def step(self, row: Any) -> Step:
        step: Step = _instance(Step, [row[i] for i in self.step_at])
        return step

    def run(self, row: Any) -> Run:
        run: Run = _instance(Run, [row[i] for i in self.run_at])
        return run


_LAYOUTS: dict[int, _Layout] = {}


def layout(cursor: Any, width: int) -> _Layout:
    """Read off a statement's columns once per process and statement (a table never
    changes under a running worker; start.sql's and finish.sql's succeed_and_start rows
    differ in width): `d.*` / `s.*` names exactly runs_step's columns, so the run's start
    where the step model's end. The cursor's description is read only then: psycopg
    builds it anew on every read."""
    found = _LAYOUTS.get(width)
    if found is None:
        names = [str(column.name) for column in cursor.description]
        n_step = len(Step._meta.concrete_fields)
        n_run = len(Run._meta.concrete_fields)

        def positions(model: type[Model], start: int, count: int) -> tuple[int, ...]:
            at = {name: start + i for i, name in enumerate(names[start : start + count])}
            columns = [str(f.column) for f in model._meta.concrete_fields]
            if set(at) != set(columns):
                raise RuntimeError(
                    f"a start returned columns {sorted(at)} for {model.__name__}, whose "
                    f"fields are {sorted(columns)}: is a migration missing?"
                )
            return tuple(at[c] for c in columns)

        found = _LAYOUTS[width] = _Layout(
            step_at=positions(Step, 0, n_step),
            run_at=positions(Run, n_step, n_run),
            extras=n_step + n_run,
        )
    return found


def _instance(model: type[Model], values: list[Any]) -> Any:
    """A model instance from a row's values in its fields' order, as from_db() builds
    it but without Model.__init__ (its per-field descriptors and its init signals, which
    nothing here listens to: a third of the start's Python time, py-spy showed): the
    attributes set directly, the state of an instance loaded from the database."""
    names = _attnames(model)
    attributes = dict(zip(names, values, strict=True))
    for i, convert in _converters(model):
        if values[i] is not None:
            attributes[names[i]] = convert(values[i], None, connection)
    return _bare(model, attributes)


def _loaded(model: type[Model], **attributes: Any) -> Any:
    """An instance of a row this transaction wrote, from its values, without
    Model.__init__; every field named (a missing one would be read from the database
    the first time it is asked for)."""
    if set(attributes) != set(_attnames(model)):
        raise TypeError(f"{model.__name__}: fields {sorted(_attnames(model))} are needed")
    return _bare(model, attributes)


def _bare(model: type[Model], attributes: dict[str, Any]) -> Any:
    """The instance, its attributes set directly, in the state of one loaded from the
    database."""
    obj = model.__new__(model)
    obj.__dict__.update(attributes)
    state = obj._state = ModelState()
    state.adding, state.db = False, "default"
    return obj


@cache
def _attnames(model: type[Model]) -> tuple[str, ...]:
    return tuple(f.attname for f in model._meta.concrete_fields)


@cache
def _converters(model: type[Model]) -> tuple[tuple[int, Any], ...]:
    """The fields whose raw value needs from_db_value (JSON columns arrive as text on
    Django's connections), by position."""
    out = []
    for i, f in enumerate(model._meta.concrete_fields):
        convert = getattr(f, "from_db_value", None)
        if convert is not None:
            out.append((i, convert))
    return tuple(out)


def start_queued(step_id: int, worker: str) -> Started | None:
    """Start the step if it is queued (or retrying and due): one transaction, whose
    events are written together at its end. None if it is not startable."""
    with transaction.atomic(), events.buffered():
        return _start_in_transaction(step_id, worker)


@dataclass(frozen=True, slots=True)
class StartParams:
    """What a start statement (start.sql's, or finish.sql's succeed_and_start) is sent
    besides its step, and what the attempt it starts keeps of that moment."""

    worker: str
    lease: float  # the default lease: a step's own is set after (renew_lease)
    span_id: str | None  # None while tracing is off: the column stays NULL
    began_ns: int
    sent: float

    @classmethod
    def now(cls, worker: str) -> StartParams:
        sent = time.monotonic()
        span_id = tracing.new_span_id()
        return cls(
            worker=worker,
            lease=float(settings.RUNS_LEASE_SECONDS),
            span_id=span_id,
            began_ns=time.time_ns() if span_id is not None else 0,
            sent=sent,
        )

    def sql(self) -> dict[str, Any]:
        return {
            "running_attempt": AttemptStatus.RUNNING,
            "worker": self.worker,
            "lease": self.lease,
            "span_id": self.span_id,
        }


def _start_in_transaction(step_id: int, worker: str) -> Started | None:
    """The start's statement (start.sql), in the caller's transaction (its events in the
    caller's buffer)."""
    params = StartParams.now(worker)
    with prepared.cursor() as cursor:
        cursor.execute(
            SQL["start"],
            {
                "step_id": step_id,
                "running": StepStatus.RUNNING,
                "queued": StepStatus.QUEUED,
                "retrying": StepStatus.RETRYING,
                "active": ACTIVE,
                "compensating": COMPENSATING,
                **params.sql(),
            },
        )
        row = cursor.fetchone()
        if row is None:
            return None
        found = layout(cursor, len(row))
    results, _, parent_revision = row[found.extras :]
    return started_from_row(found, row, params, results=results, parent_revision=parent_revision)


def started_from_row(
    found: _Layout,
    row: Any,
    params: StartParams,
    *,
    results: Any,
    parent_revision: int | None,
) -> Started:
    """The Started of a start statement's row (the step just moved to running, its
    run), with what the statement leaves to this process: the workflow's definition,
    slots, a lease of the step's own, the run's start, the step_started event, the
    claim its kind takes at the start. Raises NotStartableHere (the workflow or step is
    unknown here, or is a wait) and slots.NoSlot: both roll the start back."""
    step, run = found.step(row), found.run(row)
    if isinstance(results, str):  # jsonb arrives as text on Django's connections
        results = json.loads(results)
    step._state.fields_cache["run"] = run  # what `step.run = run` does, less its checks
    wf = registry.get(run.workflow, run.version)
    stepdef = wf.stepdef(step.name) if wf is not None else None
    if wf is None or stepdef is None or stepdef.is_wait:
        # Unknown here, or a wait (which takes no attempt): the careful path decides.
        raise NotStartableHere

    assert step.current_attempt_id is not None
    scopes = scopes_for(wf, stepdef, run.input)
    if scopes:
        # Raises slots.NoSlot, which rolls the whole start back: the step stays queued.
        take_slots(step, step.current_attempt_id, scopes)
    lease = lease_for(stepdef)
    until = kill_after(timeout_for(stepdef))
    if lease != params.lease or until < lease:  # not on the default path: no statement
        renew_lease(step.current_attempt_id, lease, until=until)
    attempt: Attempt = _loaded(
        Attempt,
        id=step.current_attempt_id,
        step_id=step.id,
        run_id=run.id,
        number=step.attempts,
        status=AttemptStatus.RUNNING,
        worker=params.worker,
        started_at=step.started_at,  # the same statement_timestamp() set both
        lease_expires_at=None,  # the database's to say (its clock): never read from here
        finished_at=None,
        error="",
        effect_entered_at=None,
        span_id=params.span_id,
    )
    step._state.fields_cache["current_attempt"] = attempt
    # The run's status as of this statement's snapshot: a run already running never
    # goes back to pending, so only a pending one needs the conditional UPDATE.
    if run.status == RunStatus.PENDING:
        start_run(run.id)
    run.status = RunStatus.RUNNING
    events.append_event(
        run.id,
        events.StepStarted(step=step.key, worker=params.worker),
        step_id=step.id,
        attempt_number=attempt.number,
    )
    claim = None
    if step.parent_id is None and step.kind in CLAIM_AT_START:
        claim = take_claim(run=run, step=step, stepdef=stepdef, attempt=attempt, item=None)
    return Started(
        step=step,
        run=run,
        attempt=attempt,
        workflow=wf,
        stepdef=stepdef,
        lease=LeaseClock(lease, set_at=params.sent),
        claim=claim,
        results=results,
        parent_revision=parent_revision,
        scopes=scopes,
        began_ns=params.began_ns,
    )


def chained_successor(previous: Started) -> str | None:
    """The name of the one step `previous`'s success may start in its own statement
    (finish.sql, succeed_and_start): a plain dependent (start_successor's rule) that
    takes no claim at its start, its workflow's only dependent of `previous`. None: the
    finish queues what becomes ready and start_successor starts it, as before."""
    workflow, step = previous.workflow, previous.step
    if faults.enabled() or step.parent_id is not None or step.compensates:
        return None

    def derive() -> str | None:
        names = workflow.dependents(step.name)
        if (
            _plain_dependent_kinds(workflow, step) is not None
            and len(names) == 1
            and workflow.steps[names[0]].kind not in CLAIM_AT_START
        ):
            return names[0]
        return None

    return definitions.once("chained successor", workflow, step.name, derive)


def start_successor(previous: Started, step_id: int) -> Started | None:
    """Start the one step that `previous`'s success made ready, inside the transaction
    that records that success, so that the finish and the successor's start commit
    together: one commit per step of a chain instead of two. None: not started here
    (the caller starts it after the commit, as a message would).

    Committing the start early changes nothing a crash can observe: a worker that dies
    after this commit leaves the successor running under a lease that the sweeper
    recovers, as if it had died just after a start of its own. Only where nothing in the
    start can fail after its UPDATE without taking the finish down with it: every
    dependent `previous` can make ready is a plain step of its workflow (not a wait, a
    map or a conditional step: the careful path decides those). A successor that takes
    a claim starts under a savepoint, since an existing claim may refuse it. Not with
    fault injection, whose `after_commit` point sits between the two."""
    if faults.enabled():
        return None
    kinds = _plain_dependent_kinds(previous.workflow, previous.step)
    if kinds is None:
        return None
    worker = previous.attempt.worker
    if not any(kind in CLAIM_AT_START for kind in kinds):
        return _start_in_transaction(step_id, worker)
    mark = events.buffer_mark()
    try:
        with transaction.atomic():  # a savepoint
            return _start_in_transaction(step_id, worker)
    except ClaimNotTakeable:
        events.rewind_buffer(mark)  # the savepoint's events went with it
        return None


def _plain_dependent_kinds(workflow: Workflow, step: Step) -> tuple[str, ...] | None:
    """The effect kinds of the steps `step`'s success can make ready, if all of its
    dependents are plain (no wait, map or condition); else None.
    Computed once per process per step name (core/definitions.py)."""
    if step.parent_id is not None or step.compensates:
        return None  # a batch completes its map; a compensation, the compensating run

    def derive() -> tuple[str, ...] | None:
        defs = [workflow.steps[n] for n in workflow.dependents(step.name)]
        # A limited or rated dependent (slots.py) may be refused a slot or put off to
        # its turn (NoSlot, which would roll the finish back): started after the commit.
        plain = (
            bool(defs)
            and workflow.limit is None
            and workflow.rate is None
            and all(
                not (d.is_wait or d.is_map or d.when or d.limits or d.hold or d.rate) for d in defs
            )
        )
        # A run that began compensating meanwhile makes a compensation ready instead.
        kinds = [d.kind for d in defs] + [c.kind for c in workflow.compensations.values()]
        return tuple(map(str, kinds)) if plain else None

    return definitions.once("plain dependents", workflow, step.name, derive)


def refuse(step: Step, worker: str, reason: str) -> None:
    """Leave the step as it is (queued, for a worker that knows its workflow; the
    sweeper republishes it) and record why, once per distinct reason."""
    log.warning("refusing step %s of run %s: %s", step.key, step.run_id, reason)
    with transaction.atomic():
        lock_run(step.run_id)  # the run before its steps (core/locks.py)
        if (
            Step.objects.filter(pk=step.id, status=StepStatus.QUEUED)
            .exclude(error=reason)
            .update(error=reason)
        ):
            events.append_event(
                step.run_id,
                events.StepRefused(step=step.key, reason=reason, worker=worker),
                step_id=step.id,
            )
