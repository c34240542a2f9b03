"""Read side of the operator pages: the queue of unresolved claims, one claim with
everything needed to decide it, the history of resolutions, and the counts for the
navigation badge.

Every list is a `Rows` object: lazy and sliceable, so `Paginator(rows, 200)` costs one
COUNT and one SELECT per page, whatever the page size (the run, step, attempt and take
come in the same SELECT; whether a step has a probe is a registry lookup, no query).
Times (ages, staleness, whether a take is live) are computed by PostgreSQL, on the
database's clock.

How long a claim has waited is counted from `Claim.unresolved_at`, set by the engine
in the statement that made the claim unresolved (its `created_at` is when its attempt
started, up to a lease earlier).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, overload

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import (
    BooleanField,
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Now

from runs import sql
from runs.engine import db_now_plus, preview_resolutions, probe_of
from runs.errors import PostconditionFailed
from runs.models import Attempt, Claim, Event, Pause
from runs.reads.filters import search_keys_of
from runs.reads.limits import holding
from runs.record import events
from runs.record.history import snapshot
from runs.resolutions import Preview
from runs.sql import routing
from runs.states import ClaimStatus

from .services import Take
from .wording import preview_summary

SQL = sql.load(__file__)

T = TypeVar("T")

# claim_detail shows at most this many events around a claim (the latest ones).
EVENTS_AROUND_CLAIM = 100

# What made a claim unresolved (QueueRow.cause).
WORKER_DIED = "worker_died"  # its attempt's lease expired: the worker died or hung
EXCEPTION = "exception"  # the step raised something other than NotApplied
POSTCONDITION = "postcondition"  # the step's verify() rejected its result

_POSTCONDITION_PREFIX = f"{PostconditionFailed.__module__}.{PostconditionFailed.__qualname__}: "


def classify(reason: str) -> tuple[str, str]:
    """(cause, message) from a claim's error, as the engine writes it: the sweeper's
    "worker <name> died (lease expired)", or the exception the attempt raised
    ("<type>: <message>"), PostconditionFailed meaning a failed verify()."""
    if not reason:
        return "", ""
    if reason.startswith("worker ") and reason.endswith(" died (lease expired)"):
        return WORKER_DIED, reason
    if reason.startswith(_POSTCONDITION_PREFIX):
        return POSTCONDITION, reason.removeprefix(_POSTCONDITION_PREFIX)
    return EXCEPTION, reason


class Rows(Generic[T]):
    """A lazy, sliceable list over a queryset, each object turned into a row: what
    Django's Paginator needs (count() and slicing), one query per page."""

    def __init__(
        self,
        queryset: QuerySet[Any],
        make: Callable[[Any], T],
        *,
        counted: QuerySet[Any] | None = None,
    ) -> None:
        self.queryset = queryset
        self.make = make
        # The same rows without the joins that only feed the display, for COUNT(*).
        self.counted = queryset if counted is None else counted

    def count(self) -> int:
        return self.counted.count()

    def __len__(self) -> int:
        return self.count()

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self.make(obj) for obj in self.queryset[index]]
        return self.make(self.queryset[index])

    def __iter__(self) -> Iterator[T]:
        return (self.make(obj) for obj in self.queryset)


# --- the queue -------------------------------------------------------------------------
@dataclass(frozen=True)
class QueueRow:
    claim_id: int
    key: str  # the idempotency key
    status: str
    run_id: uuid.UUID
    run_status: str
    workflow: str
    version: int
    step: str  # the step's key ("merge", "migrate[3]")
    step_name: str
    kind: str  # effect kind
    attempt: int | None  # the number of the attempt that held the claim
    attempts: int  # attempts started so far, and at most
    max_attempts: int
    cause: str  # WORKER_DIED | EXCEPTION | POSTCONDITION ("" for a claim never unresolved)
    reason: str  # the message that goes with the cause
    # Everything known about the effect: "probe" (the last inconclusive answer),
    # "late_result" / "late_error" / "effect_called" (what a fenced-off attempt knew),
    # "resolution" (the resolver's, once resolved).
    evidence: dict[str, Any] | None
    probe_evidence: dict[str, Any] | None  # evidence["probe"]
    late_result: bool  # evidence holds a late result (or error) of a fenced attempt
    has_probe: bool
    probe_after: datetime | None
    probed_at: datetime | None
    unresolved_at: datetime | None
    age: timedelta | None  # since unresolved_at, on the database's clock
    stale: bool  # unresolved for longer than RECONCILIATION_STALE_MINUTES
    take: Take | None  # a live take ("on it"), if any
    # The resolution, once there is one (empty / None before).
    resolved_by: str = ""
    resolved_at: datetime | None = None
    resolution_note: str = ""


def _with_row(claims: QuerySet[Claim]) -> QuerySet[Claim]:
    """Claims with what a row shows, in one SELECT (large JSON of runs and steps left
    out: claim_detail reads the run's input)."""
    stale_after = float(settings.RECONCILIATION_STALE_MINUTES) * 60
    username = f"take__taken_by__{get_user_model().USERNAME_FIELD}"
    return (
        claims.select_related("run", "step")
        .defer("run__input", "run__result", "step__items", "step__result", "result")
        .annotate(
            attempt_number=F("attempt__number"),
            age=ExpressionWrapper(Now() - F("unresolved_at"), output_field=DurationField()),
            stale=ExpressionWrapper(
                Q(unresolved_at__lt=db_now_plus(-stale_after)), output_field=BooleanField()
            ),
            take_live=ExpressionWrapper(Q(take__expires_at__gt=Now()), output_field=BooleanField()),
            take_user=F(username),
            take_user_id=F("take__taken_by_id"),
            take_at=F("take__taken_at"),
            take_until=F("take__expires_at"),
        )
    )


def _queue_row(claim: Any) -> QueueRow:
    run, step = claim.run, claim.step
    cause, reason = classify(claim.error)
    evidence = claim.evidence
    take = None
    if claim.take_live and claim.status == ClaimStatus.UNRESOLVED:
        take = Take(claim.pk, claim.take_user, claim.take_user_id, claim.take_at, claim.take_until)
    return QueueRow(
        claim_id=claim.pk,
        key=claim.key,
        status=claim.status,
        run_id=run.id,
        run_status=run.status,
        workflow=run.workflow,
        version=run.version,
        step=step.key,
        step_name=step.name,
        kind=claim.kind,
        attempt=claim.attempt_number,
        attempts=step.attempts,
        max_attempts=step.max_attempts,
        cause=cause,
        reason=reason,
        evidence=evidence,
        probe_evidence=evidence.get("probe") if isinstance(evidence, dict) else None,
        late_result=isinstance(evidence, dict)
        and ("late_result" in evidence or "late_error" in evidence),
        has_probe=probe_of(run, step) is not None,
        probe_after=claim.probe_after,
        probed_at=claim.probed_at,
        unresolved_at=claim.unresolved_at,
        age=claim.age,
        stale=bool(claim.stale) and claim.status == ClaimStatus.UNRESOLVED,
        take=take,
        resolved_by=claim.resolved_by,
        resolved_at=claim.resolved_at,
        resolution_note=claim.resolution_note,
    )


def unresolved_queue(claims: QuerySet[Claim] | None = None) -> Rows[QueueRow]:
    """Unresolved claims (those of `claims`, an incidents.ClaimFilter's, or all), the
    longest waiting first."""
    if claims is None:
        claims = Claim.objects.filter(status=ClaimStatus.UNRESOLVED)
    return Rows(_with_row(claims).order_by("unresolved_at", "id"), _queue_row, counted=claims)


def claim_list(*, status: str | None = None, workflow: str | None = None) -> Rows[QueueRow]:
    """Claims of any status, or of one (the REST API's claim list), optionally of one
    workflow: unresolved ones in the queue's order (the longest waiting first), the
    others newest first."""
    claims = Claim.objects.all()
    if status:
        claims = claims.filter(status=status)
    if workflow:
        claims = claims.filter(run__workflow=workflow)
    order = ("unresolved_at", "id") if status == ClaimStatus.UNRESOLVED else ("-id",)
    return Rows(_with_row(claims).order_by(*order), _queue_row, counted=claims)


def claims_by_id(claim_ids: list[int]) -> dict[int, Claim]:
    """These claims as they are now, with their steps (one query; none for no ids)."""
    if not claim_ids:
        return {}
    return {c.pk: c for c in Claim.objects.select_related("step").filter(pk__in=claim_ids)}


def queue_size() -> int:
    return Claim.objects.filter(status=ClaimStatus.UNRESOLVED).count()


@dataclass(frozen=True)
class QueueSummary:
    size: int
    oldest_age: timedelta | None
    stale: int  # how many are older than RECONCILIATION_STALE_MINUTES


def queue_summary() -> QueueSummary:
    """The queue at a glance (the overview): size, oldest age and stale count, in one
    indexed query (claim_unresolved_idx)."""
    with routing.cursor() as cursor:
        cursor.execute(
            SQL["queue_summary"],
            {
                "stale_seconds": float(settings.RECONCILIATION_STALE_MINUTES) * 60,
                "unresolved": ClaimStatus.UNRESOLVED,
            },
        )
        size, oldest, stale = cursor.fetchone()
    return QueueSummary(int(size), oldest, int(stale))


def oldest_unresolved_age() -> timedelta | None:
    """How long the longest-waiting claim has waited (None: the queue is empty)."""
    return queue_summary().oldest_age


def workflows_in_queue(chosen: str = "") -> list[str]:
    """The workflows with unresolved claims, by name, for the queue's workflow filter;
    with `chosen` among them even when none of its claims is left (the filter still
    names it). No counts: the incident groups say them, and stay current."""
    names = set(
        Claim.objects.filter(status=ClaimStatus.UNRESOLVED)
        .values_list("run__workflow", flat=True)
        .distinct()
        .order_by()
    )
    if chosen:
        names.add(chosen)
    return sorted(names)


def pauses_in_queue(workflows: list[str]) -> list[Pause]:
    """The pauses of workflows with claims in the queue (docs/operating.md#pause-and-resume):
    a decision on one of their claims is recorded, but what it queues waits for the resume."""
    return (
        list(Pause.objects.filter(workflow__in=workflows).order_by("workflow", "step"))
        if workflows
        else []
    )


# --- one claim -------------------------------------------------------------------------
@dataclass(frozen=True)
class AttemptRow:
    number: int
    worker: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    lease_expires_at: datetime
    error: str


@dataclass(frozen=True)
class EventRow:
    seq: int
    type: str
    created_at: datetime
    step: str | None  # the step's key, for step events
    attempt_number: int | None
    payload: dict[str, Any]
    schema_version: int  # how to read the payload (runs.record.events.read)


@dataclass(frozen=True)
class ClaimDetail:
    """Everything to decide a claim without leaving the page."""

    row: QueueRow
    claim: Claim  # resolution fields: resolved_by, resolved_at, resolution_note, result
    run_input: dict[str, Any]
    attempts: list[AttemptRow]  # the step's attempts, in order
    events: list[EventRow]  # the step's events and the run's own within the claim's span
    events_truncated: bool  # older events than these exist (EVENTS_AROUND_CLAIM)
    late_results: list[EventRow]  # late results that arrived after the resolution
    # Probe answers that arrived after the resolution and say the opposite (the
    # resolution stands; their evidence is in the event, the claim cannot be amended).
    probe_contradictions: list[EventRow]
    probe_due: bool  # "check again" would be accepted now (if the step has a probe)
    previews: dict[str, Preview]  # what resolving as succeeded / failed would do
    said: dict[str, str]  # the same, in words (wording.preview_summary)
    # Runs whose guarded step its key hold keeps queued while it is unresolved.
    holding: int = 0
    # Its run's search fields' values (field, value): each links to the runs with the
    # same business key, where the same effect may have been asked for again.
    search_keys: list[tuple[str, str]] = field(default_factory=list)


def claim_detail(claim_id: int) -> ClaimDetail | None:
    """The claim with its run's input, its step's attempts, the events around it, its
    evidence, its take and the preview of both outcomes; None if there is no such
    claim. Read from one snapshot (a run moving on meanwhile is not shown half before,
    half after), in a constant number of queries."""
    with snapshot():
        return _claim_detail(claim_id)


def _claim_key(e: EventRow) -> str | None:
    """The claim a late result or a probe's contradiction is about (its key)."""
    event = events.read(e.type, e.payload, e.schema_version)
    if isinstance(event, events.LateResultAfterResolution | events.ProbeContradictsResolution):
        return event.key
    return None


def _claim_detail(claim_id: int) -> ClaimDetail | None:
    claim = (
        _with_row(Claim.objects.all())
        .defer(None)
        .annotate(
            probe_due=ExpressionWrapper(
                Q(probe_after__isnull=True) | Q(probe_after__lte=Now()),
                output_field=BooleanField(),
            )
        )
        .filter(pk=claim_id)
        .first()
    )
    if claim is None:
        return None
    attempts = [
        AttemptRow(*values)
        for values in Attempt.objects.filter(step_id=claim.step_id)
        .order_by("number")
        .values_list(
            "number", "worker", "status", "started_at", "finished_at", "lease_expires_at", "error"
        )
    ]
    around = Q(step_id=claim.step_id) | Q(step__isnull=True, created_at__gte=claim.created_at)
    if claim.completed_at is not None:
        around &= Q(created_at__lte=claim.completed_at) | Q(step_id=claim.step_id)
    rows = list(
        Event.objects.filter(around, run_id=claim.run_id)
        .order_by("-seq")
        .values_list(
            "seq", "type", "created_at", "step__key", "attempt_number", "payload", "schema_version"
        )[: EVENTS_AROUND_CLAIM + 1]
    )
    truncated = len(rows) > EVENTS_AROUND_CLAIM
    around_events = [EventRow(*values) for values in reversed(rows[:EVENTS_AROUND_CLAIM])]
    late = [
        e
        for e in around_events
        if e.type == events.LATE_RESULT_AFTER_RESOLUTION and _claim_key(e) == claim.key
    ]
    contradictions = [
        e
        for e in around_events
        if e.type == events.PROBE_CONTRADICTS_RESOLUTION and _claim_key(e) == claim.key
    ]
    previews = {
        str(outcome): preview_resolutions(claim_ids=[claim.pk], outcome=outcome)[0]
        for outcome in (ClaimStatus.SUCCEEDED, ClaimStatus.FAILED)
    }
    return ClaimDetail(
        row=_queue_row(claim),
        claim=claim,
        run_input=claim.run.input,
        attempts=attempts,
        events=around_events,
        events_truncated=truncated,
        late_results=late,
        probe_contradictions=contradictions,
        probe_due=bool(claim.probe_due),
        previews=previews,
        said={outcome: preview_summary(p) for outcome, p in previews.items()},
        holding=holding(claim.hold_key) if claim.status == ClaimStatus.UNRESOLVED else 0,
        search_keys=search_keys_of(claim.run),
    )


# --- the history of resolutions --------------------------------------------------------
@dataclass(frozen=True)
class HistoryRow:
    claim_id: int
    key: str
    run_id: uuid.UUID
    workflow: str
    version: int
    step: str
    kind: str
    outcome: str  # succeeded | failed
    resolved_by: str  # a username, or "probe"
    resolved_at: datetime
    note: str
    evidence: dict[str, Any] | None
    result: Any
    unresolved_at: datetime | None
    # A fenced-off attempt's result or error arrived after the resolution (it stands;
    # the disagreement deserves a look).
    late_result_after_resolution: bool
    # A probe answered the opposite after the resolution (it stands; have a look).
    probe_contradicts_resolution: bool


def _history_row(claim: Any) -> HistoryRow:
    return HistoryRow(
        claim_id=claim.pk,
        key=claim.key,
        run_id=claim.run_id,
        workflow=claim.workflow,
        version=claim.version,
        step=claim.step_key,
        kind=claim.kind,
        outcome=claim.status,
        resolved_by=claim.resolved_by,
        resolved_at=claim.resolved_at,
        note=claim.resolution_note,
        evidence=claim.evidence,
        result=claim.result,
        unresolved_at=claim.unresolved_at,
        late_result_after_resolution=claim.late,
        probe_contradicts_resolution=claim.probe_contradicts,
    )


def _claims_event(event_type: str) -> QuerySet[Event]:
    """The outer claim's events of this type (their payload names its key)."""
    return Event.objects.annotate(claim_key=KT("payload__key")).filter(
        run_id=OuterRef("run_id"), type=event_type, claim_key=OuterRef("key")
    )


def resolution_history(
    *,
    operator: str | None = None,
    outcome: str | None = None,
    workflow: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Rows[HistoryRow]:
    """Resolved claims, the latest resolution first (claim_resolved_idx); filters: who
    resolved (a username, or "probe"), the outcome, the workflow (by name), and
    resolved_at in [since, until)."""
    claims = Claim.objects.filter(resolved_at__isnull=False)
    if operator:
        claims = claims.filter(resolved_by=operator)
    if outcome:
        claims = claims.filter(status=outcome)
    if workflow:
        claims = claims.filter(run__workflow=workflow)
    if since is not None:
        claims = claims.filter(resolved_at__gte=since)
    if until is not None:
        claims = claims.filter(resolved_at__lt=until)
    rows = claims.annotate(
        workflow=F("run__workflow"),
        version=F("run__version"),
        step_key=F("step__key"),
        late=Exists(_claims_event(events.LATE_RESULT_AFTER_RESOLUTION)),
        probe_contradicts=Exists(_claims_event(events.PROBE_CONTRADICTS_RESOLUTION)),
    ).order_by("-resolved_at", "-id")
    return Rows(rows, _history_row, counted=claims)


def history_workflows() -> list[str]:
    """Workflows with resolved claims (the history's workflow filter)."""
    return list(
        Claim.objects.filter(resolved_at__isnull=False)
        .order_by("run__workflow")
        .values_list("run__workflow", flat=True)
        .distinct()
    )


def history_operators() -> list[str]:
    """Who has resolved claims (the history's operator filter)."""
    return list(
        Claim.objects.filter(resolved_at__isnull=False)
        .order_by("resolved_by")
        .values_list("resolved_by", flat=True)
        .distinct()
    )


__all__ = [
    "EXCEPTION",
    "POSTCONDITION",
    "WORKER_DIED",
    "AttemptRow",
    "ClaimDetail",
    "EventRow",
    "HistoryRow",
    "QueueRow",
    "QueueSummary",
    "Rows",
    "claim_detail",
    "claim_list",
    "claims_by_id",
    "classify",
    "history_operators",
    "history_workflows",
    "oldest_unresolved_age",
    "queue_size",
    "queue_summary",
    "resolution_history",
    "unresolved_queue",
    "workflows_in_queue",
]
