"""The event catalogue and append_event(), the only writer of the event log
(docs/architecture.md#history-and-restore, docs/architecture.md#the-event-catalogue).
Each event type is a frozen class below; readers turn a stored row back into one with
read().

Sequence numbers come from `UPDATE run SET last_seq = last_seq + n RETURNING`, which
serializes event writers of one run on its row for the rest of their transaction.
That is why map items write no events (docs/architecture.md#map-steps): batch-level facts only,
and why
the engine's start and finish buffer their events (`buffered()`) and write them in one
statement at the end of their transaction: the run's row is then locked only from that
statement to the commit, not from the first event on (which serialised the parallel
steps and batches of one run).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from psycopg.types.json import Jsonb

from runs import sql
from runs.models import Event as EventRow
from runs.sql import prepared

SQL = sql.load(__file__)

# --- the event catalogue (docs/architecture.md#the-event-catalogue) -------------------
# One frozen, keyword-only class per event type; TYPE is the string stored in
# runs_event.type (never change one: stored events carry it). A field's name is its key
# in the stored payload. Three kinds of field:
#   - no default: always written;
#   - `field(default=d, metadata=SOMETIMES)`: written only when it is not `d`, for the
#     keys a writer adds only in some cases (a payload without the key reads as `d`);
#   - a plain default: always written now, but events stored before the field was
#     added lack it (they read as the default).


class _Absent:
    """The default of a key whose absence differs from any value it can hold (null
    included): `field(default=ABSENT, metadata=SOMETIMES)`."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()
# The metadata of a field written only when it is not its default.
SOMETIMES = {"sometimes": True}


class CatalogueError(ValueError):
    """A stored or written event the catalogue cannot read: an unknown type, a key it
    does not know (strict reads), a field it needs and the payload lacks."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """The base of the catalogue's classes. `as_payload()` is what append_event stores."""

    TYPE: ClassVar[str] = ""
    FIELDS: ClassVar[frozenset[str]] = frozenset()

    def as_payload(self) -> dict[str, Any]:
        raise NotImplementedError  # generated per class by @_event


CATALOGUE: dict[str, type[Event]] = {}
E = TypeVar("E", bound=Event)


def _event(cls: type[E]) -> type[E]:
    """Register a catalogue class and give it its `as_payload()`: generated code (one
    dict display, one `if` per SOMETIMES key), as `dataclass` generates `__init__`:
    the hot path writes thousands of events, a loop over fields() costs twice as much."""
    if not cls.TYPE or cls.TYPE in CATALOGUE:
        raise TypeError(f"{cls.__name__}: TYPE {cls.TYPE!r} is empty or taken")
    always: list[str] = []
    maybe: list[str] = []
    env: dict[str, Any] = {}
    for f in fields(cls):
        if f.metadata.get("sometimes"):
            env[f"_d_{f.name}"] = f.default
            maybe.append(
                f"    if self.{f.name} is not _d_{f.name} and self.{f.name} != _d_{f.name}:\n"
                f"        d[{f.name!r}] = self.{f.name}\n"
            )
        else:
            always.append(f"{f.name!r}: self.{f.name}")
    source = (
        "def as_payload(self):\n"
        f"    d = {{{', '.join(always)}}}\n" + "".join(maybe) + "    return d\n"
    )
    exec(source, env)  # built from the class's own field names
    cls.as_payload = env["as_payload"]  # type: ignore[method-assign]
    cls.FIELDS = frozenset(f.name for f in fields(cls))
    CATALOGUE[cls.TYPE] = cls
    return cls


# --- run events -----------------------------------------------------------------------


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunSubmitted(Event):
    """A run was accepted (status pending)."""

    TYPE: ClassVar[str] = "run_submitted"
    workflow: str  # the workflow's name
    version: int  # the workflow's version the run follows
    input: Any  # the run's input as validated (JSON)
    # The plan's top-level steps, [{"key": name, "after": [names]}]; the first events
    # (before the pages read the plan from here) lack it.
    plan: list[dict[str, Any]] = field(default_factory=list)
    # The run's deadline (Run.deadline_at, ISO 8601), when it has one.
    deadline: str = field(default="", metadata=SOMETIMES)


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunStarted(Event):
    """The run's first attempt started (or a wait ran first): pending → running."""

    TYPE: ClassVar[str] = "run_started"


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunSucceeded(Event):
    """Every step of the run succeeded."""

    TYPE: ClassVar[str] = "run_succeeded"


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunFailed(Event):
    """The run failed: a step failed for good, or its compensations ended it."""

    TYPE: ClassVar[str] = "run_failed"
    error: str | None = field(default=None, metadata=SOMETIMES)  # why; absent when `compensated`
    compensated: bool = field(
        default=False, metadata=SOMETIMES
    )  # it ended after its compensations ran


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunCancelled(Event):
    """A person cancelled the run (or its compensations, begun by a cancel, ended)."""

    TYPE: ClassVar[str] = "run_cancelled"
    actor: str | None = field(
        default=None, metadata=SOMETIMES
    )  # who cancelled; absent when `compensated`
    reason: str | None = field(
        default=None, metadata=SOMETIMES
    )  # their reason ("" if none was given)
    still_running: list[str] | None = field(
        default=None, metadata=SOMETIMES
    )  # keys of steps running then
    compensated: bool = field(
        default=False, metadata=SOMETIMES
    )  # it ended after its compensations ran


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunDeadlinePassed(Event):
    """The run was still active at its deadline: the sweeper ends it as a cancel would
    (policies/deadlines.py); the run_cancelled or run_compensating that follows, in the
    same transaction, is the transition."""

    TYPE: ClassVar[str] = "run_deadline_passed"
    deadline: str  # the run's deadline (Run.deadline_at, ISO 8601)
    status: str  # the run's status when the sweep found it past its deadline


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunReopened(Event):
    """An operator retried failed steps of a failed run."""

    TYPE: ClassVar[str] = "run_reopened"
    actor: str  # who retried
    steps: list[str]  # the keys of the steps retried
    status: str  # the run's status after (running, or compensating)
    reason: str = field(default="", metadata=SOMETIMES)  # their reason, when given
    # Each retried step's max attempts before the reopen raised it, by key: what the
    # attempts before it were "of" (older events lack it).
    max_attempts: dict[str, int] | None = field(default=None, metadata=SOMETIMES)
    # The bulk batch that retried it (runs/batches/), when one did (older events name it
    # only in their reason, "<reason> (batch N)").
    batch: int | None = field(default=None, metadata=SOMETIMES)


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunNeedsReconciliation(Event):
    """A step's effect has an unknown outcome: the run waits for a decision."""

    TYPE: ClassVar[str] = "run_needs_reconciliation"
    step: str  # the key of the step whose claim became unresolved


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunResumed(Event):
    """Its last unresolved claim was resolved: needs_reconciliation → running."""

    TYPE: ClassVar[str] = "run_resumed"


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunWaiting(Event):
    """The run waits for a signal or a time; no worker is held."""

    TYPE: ClassVar[str] = "run_waiting"
    step: str | None = field(default=None, metadata=SOMETIMES)  # the step that began waiting, or
    reason: str | None = field(
        default=None, metadata=SOMETIMES
    )  # why it waits again after a resolution


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunWoken(Event):
    """Its last waiting step was woken: running again."""

    TYPE: ClassVar[str] = "run_woken"
    step: str  # the step woken
    reason: str  # by what (a signal, its time, a person)


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class RunCompensating(Event):
    """The run undoes its succeeded steps before it ends as `ends_as`."""

    TYPE: ClassVar[str] = "run_compensating"
    ends_as: str  # failed or cancelled, once the compensations are done
    error: str  # the run's error
    compensations: list[str]  # the compensation steps, in the order they run
    actor: str  # who or what ended the run ("engine" for a failure)
    reason: str = field(
        default="", metadata=SOMETIMES
    )  # set when a step succeeded after the run had ended


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepsWithdrawn(Event):
    """A run stopped for good: its steps still queued went back to pending, never to
    start (state/stopped.py)."""

    TYPE: ClassVar[str] = "steps_withdrawn"
    steps: list[str]  # their keys
    why: str  # how the run stopped


# --- step events ----------------------------------------------------------------------


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepQueued(Event):
    """The step may start: its message is (or will be) published."""

    TYPE: ClassVar[str] = "step_queued"
    step: str  # the step's key
    reason: str | None = field(
        default=None, metadata=SOMETIMES
    )  # why it was queued again (crash, retry, ...)


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepStarted(Event):
    """An attempt of the step started (attempt_number on the row)."""

    TYPE: ClassVar[str] = "step_started"
    step: str
    worker: str  # the worker that runs it


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepSucceeded(Event):
    """The step succeeded (by its attempt, its children, or a resolution)."""

    TYPE: ClassVar[str] = "step_succeeded"
    step: str
    resolved_by: str | None = field(
        default=None, metadata=SOMETIMES
    )  # who resolved its claim as succeeded


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepRetrying(Event):
    """An attempt failed; the step is retried after `delay`."""

    TYPE: ClassVar[str] = "step_retrying"
    step: str
    error: str  # the attempt's error
    delay: float  # seconds until the retry, rounded to ms
    # The failure was deferred (the attempt's effect had begun); older events lack it.
    deferred: bool = field(default=False, metadata=SOMETIMES)


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepFailed(Event):
    """The step failed for good."""

    TYPE: ClassVar[str] = "step_failed"
    step: str
    error: str


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepUnresolved(Event):
    """The step's effect has an unknown outcome: it waits for a decision."""

    TYPE: ClassVar[str] = "step_unresolved"
    step: str
    reason: str  # why the outcome is unknown


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepRefused(Event):
    """A worker refused to start the step (e.g. it does not know its version)."""

    TYPE: ClassVar[str] = "step_refused"
    step: str
    reason: str
    worker: str


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepWaitingForSlot(Event):
    """A start found the step's concurrency limit full, or its key held by an unresolved
    claim (docs/authoring.md#limits-and-holds): it stays queued until a slot frees.
    Written once per scope the step waits for."""

    TYPE: ClassVar[str] = "step_waiting_for_slot"
    step: str
    scope: str  # the limit's scope (`step wf.name change_id=301`) or `hold field=value`
    in_use: int  # slots in use then (for a hold: the unresolved claims on the key)
    of: int | None  # the limit's max; None for a hold


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepWaiting(Event):
    """The step waits for a signal or a time."""

    TYPE: ClassVar[str] = "step_waiting"
    step: str
    signal: str | None  # the signal's name, None for a sleep
    wake_at: str | None  # when it wakes (ISO 8601), None without a time


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class StepSkipped(Event):
    """Its condition was false; dependents proceed."""

    TYPE: ClassVar[str] = "step_skipped"
    step: str


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class AttemptCrashed(Event):
    """The attempt's worker died or its lease expired (attempt_number on the row)."""

    TYPE: ClassVar[str] = "attempt_crashed"
    step: str
    worker: str  # the worker that held it


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class AttemptTimedOut(Event):
    """The attempt ran past its timeout (attempt_number on the row) and was stopped; the
    events that follow say what its kind made of it (a retry, an unresolved claim)."""

    TYPE: ClassVar[str] = "attempt_timed_out"
    step: str
    seconds: float  # the step's timeout
    # Its call did not stop, so its worker process was ended and the attempt recovered.
    replaced: bool = field(default=False, metadata=SOMETIMES)


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class PlanExpanded(Event):
    """A map step's collection became batches (docs/architecture.md#map-steps)."""

    TYPE: ClassVar[str] = "plan_expanded"
    step: str  # the map step's key; its batches are `step[0]`, `step[1]`, ...
    revision: int  # the plan revision the batches belong to
    items: int  # the collection's size
    batches: int
    batch_size: int


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class BatchFinished(Event):
    """A batch of a map step finished: its item counts (map items write no events)."""

    TYPE: ClassVar[str] = "batch_finished"
    step: str  # the batch's key
    items: int
    completed: int  # items done by this attempt
    skipped: int  # items an earlier attempt had done (the completed-item registry)


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class CompensationPlanned(Event):
    """A compensation step entered the plan."""

    TYPE: ClassVar[str] = "compensation_planned"
    step: str  # the compensation step's key
    compensates: str  # the step it undoes
    status: str  # its status as planned (pending, queued, or failed)
    after: str | None  # the compensation it runs after, None for the first
    error: str = field(default="", metadata=SOMETIMES)  # why it was planned failed


# --- claim events (key: the claim's idempotency key) ---------------------------------


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimTaken(Event):
    """An attempt took the claim before its effect."""

    TYPE: ClassVar[str] = "claim_taken"
    key: str
    retaken: bool  # taken over from an earlier attempt (same key)


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimSucceeded(Event):
    """The attempt holding the claim succeeded: its effect happened, once."""

    TYPE: ClassVar[str] = "claim_succeeded"
    key: str


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimFailed(Event):
    """Its step failed for good and the claim's effect did not happen."""

    TYPE: ClassVar[str] = "claim_failed"
    key: str


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimUnresolved(Event):
    """The claim's outcome is unknown: it waits for a resolution."""

    TYPE: ClassVar[str] = "claim_unresolved"
    key: str
    reason: str


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimAbandoned(Event):
    """An idempotent step gave up, outcome unknown."""

    TYPE: ClassVar[str] = "claim_abandoned"
    key: str


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimResolved(Event):
    """A person (or a probe, actor "probe") decided the claim's outcome; final."""

    TYPE: ClassVar[str] = "claim_resolved"
    key: str
    outcome: str  # succeeded or failed
    actor: str
    note: str | None  # their note
    evidence: Any  # what the decision rests on (JSON), or None


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimEvidence(Event):
    """A late result kept on the unresolved claim, e.g. of a fenced-off attempt."""

    TYPE: ClassVar[str] = "claim_evidence"
    key: str
    evidence: Any


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class LateResultAfterResolution(Event):
    """A fenced-off attempt's result or error for a claim already resolved: the
    resolution stands (it is final), the reconciliation pages flag the disagreement."""

    TYPE: ClassVar[str] = "late_result_after_resolution"
    key: str
    evidence: Any
    resolved_as: str  # the resolution that stands
    resolved_by: str | None


# --- probe events ---------------------------------------------------------------------


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeRequested(Event):
    """A probe of the claim was scheduled (by the engine, or asked for by a person)."""

    TYPE: ClassVar[str] = "probe_requested"
    claim_id: int
    key: str | None = field(default=None, metadata=SOMETIMES)  # written when a person asked
    requested_by: str | None = field(default=None, metadata=SOMETIMES)  # who asked


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeInconclusive(Event):
    """The probe could not tell; the claim stays unresolved."""

    TYPE: ClassVar[str] = "probe_inconclusive"
    key: str
    evidence: Any  # what the probe saw
    requested_by: str = field(default="", metadata=SOMETIMES)  # who asked, when a person did


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeContradictsResolution(Event):
    """A probe's definite answer for a claim already resolved the other way: the
    resolution stands (it is final), the reconciliation pages flag it."""

    TYPE: ClassVar[str] = "probe_contradicts_resolution"
    key: str
    answer: str  # applied or not_applied
    result: Any = field(
        default=ABSENT, metadata=SOMETIMES
    )  # the effect's result, when applied (may be null)
    evidence: Any
    resolved_as: str
    resolved_by: str | None
    requested_by: str = field(default="", metadata=SOMETIMES)


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeGaveUp(Event):
    """The probe used up its tries without an answer (each time its worker died or
    stalled past its probe lease): the claim stays unresolved, for the operator."""

    TYPE: ClassVar[str] = "probe_gave_up"
    key: str
    tries: int
    evidence: Any  # {"reason": ..., "tries": n}


# --- signals --------------------------------------------------------------------------


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class SignalReceived(Event):
    """A signal arrived, with its actor; kept until a wait consumes it."""

    TYPE: ClassVar[str] = "signal_received"
    signal: str  # its name
    actor: str
    payload: Any  # the signal's JSON payload
    id: int  # the signal row's id


@_event
@dataclass(frozen=True, kw_only=True, slots=True)
class SignalConsumed(Event):
    """A waiting step consumed the signal."""

    TYPE: ClassVar[str] = "signal_consumed"
    step: str
    signal: str
    id: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Unknown(Event):
    """What a lenient read returns for a type the catalogue does not know (an event a
    newer release wrote, read by an older one during a deploy): readers skip it."""

    type: str
    data: dict[str, Any]

    def as_payload(self) -> dict[str, Any]:
        return dict(self.data)


# The type strings, for readers that compare a stored row's type (history, the timeline).
RUN_SUBMITTED = RunSubmitted.TYPE
RUN_STARTED = RunStarted.TYPE
RUN_SUCCEEDED = RunSucceeded.TYPE
RUN_FAILED = RunFailed.TYPE
RUN_CANCELLED = RunCancelled.TYPE
RUN_REOPENED = RunReopened.TYPE
RUN_DEADLINE_PASSED = RunDeadlinePassed.TYPE
RUN_NEEDS_RECONCILIATION = RunNeedsReconciliation.TYPE
STEP_QUEUED = StepQueued.TYPE
STEP_STARTED = StepStarted.TYPE
STEP_SUCCEEDED = StepSucceeded.TYPE
STEP_RETRYING = StepRetrying.TYPE
STEP_FAILED = StepFailed.TYPE
STEP_UNRESOLVED = StepUnresolved.TYPE
STEP_REFUSED = StepRefused.TYPE
STEP_WAITING_FOR_SLOT = StepWaitingForSlot.TYPE
ATTEMPT_CRASHED = AttemptCrashed.TYPE
ATTEMPT_TIMED_OUT = AttemptTimedOut.TYPE
PLAN_EXPANDED = PlanExpanded.TYPE
BATCH_FINISHED = BatchFinished.TYPE
CLAIM_TAKEN = ClaimTaken.TYPE
CLAIM_SUCCEEDED = ClaimSucceeded.TYPE
CLAIM_FAILED = ClaimFailed.TYPE
CLAIM_UNRESOLVED = ClaimUnresolved.TYPE
CLAIM_ABANDONED = ClaimAbandoned.TYPE
CLAIM_RESOLVED = ClaimResolved.TYPE
CLAIM_EVIDENCE = ClaimEvidence.TYPE
LATE_RESULT_AFTER_RESOLUTION = LateResultAfterResolution.TYPE
PROBE_CONTRADICTS_RESOLUTION = ProbeContradictsResolution.TYPE
PROBE_REQUESTED = ProbeRequested.TYPE
PROBE_INCONCLUSIVE = ProbeInconclusive.TYPE
PROBE_GAVE_UP = ProbeGaveUp.TYPE
RUN_RESUMED = RunResumed.TYPE
RUN_WAITING = RunWaiting.TYPE
RUN_WOKEN = RunWoken.TYPE
STEP_WAITING = StepWaiting.TYPE
STEP_SKIPPED = StepSkipped.TYPE
SIGNAL_RECEIVED = SignalReceived.TYPE
SIGNAL_CONSUMED = SignalConsumed.TYPE
RUN_COMPENSATING = RunCompensating.TYPE
STEPS_WITHDRAWN = StepsWithdrawn.TYPE
COMPENSATION_PLANNED = CompensationPlanned.TYPE


def read(
    type: str, payload: dict[str, Any] | None, schema_version: int, *, strict: bool = False
) -> Event:
    """A stored event as its catalogue class. Every schema_version so far (1) stores the
    same shape; an older one would be upgraded here. Lenient (the default, for pages
    and history): an unknown type reads as `Unknown`, a key the class does not know is
    ignored (a newer release may write it; the row keeps it, and the export copies the
    stored payload, so nothing is lost). Strict (the tests' check of every event they
    leave): both raise, so a writer of a key the catalogue does not know fails.
    A payload that lacks a field with no default raises CatalogueError either way."""
    cls = CATALOGUE.get(type)
    if cls is None or schema_version > EventRow.SCHEMA_VERSION:
        if strict:
            raise CatalogueError(f"event type {type!r} v{schema_version} is not in the catalogue")
        return Unknown(type=type, data=dict(payload or {}))
    data = payload or {}
    try:
        return cls(**data)
    except TypeError:
        unknown = data.keys() - cls.FIELDS
        if unknown and strict:
            raise CatalogueError(
                f"{type}: keys {sorted(unknown)} are not in the catalogue"
            ) from None
        try:
            return cls(**{k: v for k, v in data.items() if k in cls.FIELDS})
        except TypeError as exc:
            raise CatalogueError(f"{type}: {exc}") from None


def read_row(row: EventRow) -> Event:
    """A stored event row, read leniently."""
    return read(row.type, row.payload, row.schema_version)


def of(row: EventRow, cls: type[E]) -> E:
    """A stored event row read leniently, as the class its type says it is."""
    event = read_row(row)
    if not isinstance(event, cls):
        raise CatalogueError(f"event {row.type!r} is not a {cls.__name__}")
    return event


class _Local(threading.local):
    pending: list[tuple[uuid.UUID | str, str, int | None, int | None, dict[str, Any]]] | None = None


_local = _Local()


@contextmanager
def buffered() -> Iterator[None]:
    """Events appended inside are written when the block ends without an exception, in
    one statement per run, seq allocated in order. Use it INSIDE the transaction that
    makes the changes (`with transaction.atomic(), events.buffered():`), around code
    that does not roll back to a savepoint and carry on (the events of the rolled-back
    part would still be written). Nested blocks write with the outermost."""
    if _local.pending is not None:
        yield
        return
    pending: list[tuple[uuid.UUID | str, str, int | None, int | None, dict[str, Any]]] = []
    _local.pending = pending
    try:
        yield
    finally:
        _local.pending = None
    _write(pending)


def buffer_mark() -> int:
    """How many events the open buffer holds: rewind_buffer(mark) drops those appended
    after it, for the part of a transaction that rolled back to a savepoint."""
    assert _local.pending is not None, "buffer_mark() outside buffered()"
    return len(_local.pending)


def rewind_buffer(mark: int) -> None:
    assert _local.pending is not None, "rewind_buffer() outside buffered()"
    del _local.pending[mark:]


def _write(
    pending: list[tuple[uuid.UUID | str, str, int | None, int | None, dict[str, Any]]],
) -> None:
    runs: dict[str, list[tuple[str, int | None, int | None, dict[str, Any]]]] = {}
    for run_id, type, step_id, attempt_number, payload in pending:
        runs.setdefault(str(run_id), []).append((type, step_id, attempt_number, payload))
    for run_id, entries in runs.items():
        if len(entries) == 1:
            type, step_id, attempt_number, payload = entries[0]
            _append_now(run_id, type, step_id, attempt_number, payload)
            continue
        with prepared.cursor() as cursor:
            cursor.execute(
                SQL["append_many"],
                {
                    "n": len(entries),
                    "run": run_id,
                    "version": EventRow.SCHEMA_VERSION,
                    # One encoding of the whole list, sent as text (events.sql).
                    "events": json.dumps(entries),
                },
            )
            if cursor.rowcount != len(entries):
                raise LookupError(f"run {run_id} does not exist")


def append_event(
    run_id: uuid.UUID | str,
    event: Event,
    *,
    step_id: int | None = None,
    attempt_number: int | None = None,
) -> None:
    """Append one event to the run's log: `append_event(run_id, StepFailed(step=...,
    error=...), step_id=...)`. Call inside the transaction that makes the change the
    event records. One statement: the seq is allocated and the event inserted together;
    inside `buffered()`, at the end of the block with the others. The event is one of
    the catalogue's classes, so a misspelt or missing field fails where it is built
    (and mypy sees it before that)."""
    if not isinstance(event, Event):
        raise TypeError(f"append_event takes a catalogue event, not {event!r}")
    payload = event.as_payload()
    if _local.pending is not None:
        _local.pending.append((run_id, event.TYPE, step_id, attempt_number, payload))
        return
    _append_now(run_id, event.TYPE, step_id, attempt_number, payload)


def _append_now(
    run_id: uuid.UUID | str,
    type: str,
    step_id: int | None,
    attempt_number: int | None,
    payload: dict[str, Any],
) -> int:
    params = {
        "run": run_id,
        "type": type,
        "step": step_id,
        "attempt": attempt_number,
        "version": EventRow.SCHEMA_VERSION,
        "payload": Jsonb(payload),
    }
    with prepared.cursor() as cursor:
        cursor.execute(SQL["append_one"], params)
        row = cursor.fetchone()
    if row is None:
        raise LookupError(f"run {run_id} does not exist")
    return int(row[0])
