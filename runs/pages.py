"""Read-side queries for the run pages: a fixed number of queries per page, whatever
the size of the run (the events are paginated, the timeline reads its events by type,
map items are counted by the database, never loaded)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Func, IntegerField, Max
from django.http import QueryDict
from django.utils import timezone

from . import engine, timeline
from .models import Attempt, Claim, Event, Run, Signal, Step
from .states import RUN_FINISHED, AttemptStatus, ClaimStatus
from .workflows import registry
from .workflows.definition import WaitSpec

EVENTS_PER_PAGE = 100


class ItemCount(Func):
    """The number of items of a batch, counted by PostgreSQL: the items themselves (a
    JSON list per batch) are never loaded for the page."""

    template = (
        "CASE WHEN jsonb_typeof(%(expressions)s) = 'array' "
        "THEN jsonb_array_length(%(expressions)s) END"
    )
    output_field = IntegerField()


@dataclass
class BatchRow:
    step: Step
    attempts: list[Attempt]
    items: int
    items_done: int

    @property
    def notable(self) -> bool:
        """Worth reading one by one: not a plain success at the first attempt."""
        return (
            self.step.status != "succeeded"
            or len(self.attempts) != 1
            or any(a.status != AttemptStatus.SUCCEEDED for a in self.attempts)
        )


@dataclass
class StepRow:
    step: Step
    attempts: list[Attempt]
    claims: list[Claim]
    batches: list[BatchRow] = field(default_factory=list)
    # A wait or a sleep: what it waits for (stored as a pure step, it is not one).
    wait: WaitSpec | None = None

    @property
    def kind(self) -> str:
        """What the step is: its effect kind, or wait / sleep."""
        if self.wait is None:
            return str(self.step.kind)
        return "wait" if self.wait.signal else "sleep"

    @property
    def items(self) -> int:
        return sum(b.items for b in self.batches)

    @property
    def items_done(self) -> int:
        return sum(b.items_done for b in self.batches)

    @property
    def notable_batches(self) -> list[BatchRow]:
        return [b for b in self.batches if b.notable]

    @property
    def plain_batches(self) -> int:
        return len(self.batches) - len(self.notable_batches)


@dataclass
class RunPage:
    run: Run
    steps: list[StepRow]
    claims: list[Claim]
    item_counts: dict[str, dict[str, int]]
    events: Page[Event] | None
    # (type, number of events of that type in the run), by type
    event_types: list[tuple[str, int]]
    timeline: timeline.Timeline | None
    now: datetime
    # The signals it received, oldest first, with who sent each (who may: its wait).
    signals: list[Signal] = field(default_factory=list)

    @property
    def submitter(self) -> str:
        return engine.shown(self.run.submitted_by, self.run.submitted_via)

    @property
    def unresolved(self) -> list[Claim]:
        return [c for c in self.claims if c.status == ClaimStatus.UNRESOLVED]

    @property
    def event_total(self) -> int:
        return sum(n for _, n in self.event_types)

    @property
    def finished(self) -> bool:
        return self.run.status in RUN_FINISHED


def run_page(
    run_id: uuid.UUID,
    *,
    events_page: int | str | None = 1,
    event_type: str = "",
    events: bool | None = True,
    with_timeline: bool = True,
    expand: Collection[str] = (),
    collapse: Collection[str] = (),
    now: datetime | None = None,
) -> RunPage:
    """Everything the run page shows. `events=None`: the event log only if the run has
    finished (the live refresh sends it once, when the run ends); `with_timeline=False`
    for the event log alone.

    Queries: the run, its steps, their attempts, its step claims, its map items counted
    by (batch, attempt, status), its timeline events (by type); then the event types
    with their counts and one page of events. Eight, whatever the number of events,
    batches or items; the event log alone, four."""
    now = now or timezone.now()
    run = Run.objects.get(pk=run_id)
    steps = list(
        Step.objects.filter(run=run)
        .defer("items")
        .annotate(item_count=ItemCount(F("items")))
        .order_by("id")
    )
    by_id = {s.pk: s for s in steps}
    if not with_timeline:  # the event log alone: it needs the steps' keys, nothing more
        page, types = _event_log(run, by_id, events_page, event_type)
        return RunPage(run, [], [], {}, page, types, None, now)
    attempts = list(Attempt.objects.filter(run=run).order_by("step_id", "number"))
    for attempt in attempts:
        attempt.step = by_id[attempt.step_id]
    claims = list(Claim.objects.filter(run=run, item_key__isnull=True).order_by("id"))
    for claim in claims:
        claim.step = by_id[claim.step_id]

    # Map items: counted, never loaded. A batch's items done; per attempt, how many it
    # committed and when the last one did (a crashed attempt's last sign of life).
    items_done: dict[int, int] = defaultdict(int)
    progress: dict[int, timeline.ItemProgress] = {}
    counts: dict[str, dict[str, int]] = {}
    rows = (
        Claim.objects.filter(run=run, item_key__isnull=False)
        .values("step_id", "attempt_id", "status")
        .annotate(n=Count("id"), last=Max("completed_at"))
        .order_by()
    )
    for row in rows:
        name = by_id[row["step_id"]].name
        per = counts.setdefault(name, {})
        per[row["status"]] = per.get(row["status"], 0) + row["n"]
        if row["status"] != ClaimStatus.SUCCEEDED:
            continue
        items_done[row["step_id"]] += row["n"]
        if row["attempt_id"] is not None:
            before = progress.get(row["attempt_id"])
            last = row["last"]
            if before is not None and before.last_at and (last is None or before.last_at > last):
                last = before.last_at
            progress[row["attempt_id"]] = timeline.ItemProgress(
                (before.committed if before else 0) + row["n"], last
            )

    tries: dict[int, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        tries[attempt.step_id].append(attempt)
    by_step: dict[int, list[Claim]] = defaultdict(list)
    for claim in claims:
        by_step[claim.step_id].append(claim)
    waits = _waits(run)
    top: dict[int, StepRow] = {}
    for step in steps:
        if step.parent_id is None:
            top[step.pk] = StepRow(
                step, tries[step.pk], by_step[step.pk], wait=waits.get(step.name)
            )
    for step in steps:
        if step.parent_id is not None and step.parent_id in top:
            top[step.parent_id].batches.append(
                BatchRow(step, tries[step.pk], step.item_count or 0, items_done[step.pk])
            )
    for row in top.values():
        row.batches.sort(key=lambda b: (b.step.batch_index or 0, b.step.pk))

    marks = list(Event.objects.filter(run=run, type__in=timeline.MARK_TYPES).order_by("seq"))
    drawn = timeline.build(
        run,
        steps,
        attempts,
        marks,
        now=now,
        items=progress,
        items_done=items_done,
        expand=expand,
        collapse=collapse,
        leases=_leases(run),
        waits=waits,
    )
    for attempt in attempts:
        # Where the steps table says a crashed attempt's worker was last seen alive.
        attempt.last_seen = drawn.last_seen.get(attempt.pk)  # type: ignore[attr-defined]
    page: Page[Event] | None = None
    types: list[tuple[str, int]] = []
    if events or (events is None and run.status in RUN_FINISHED):
        page, types = _event_log(run, by_id, events_page, event_type)
    signals = list(Signal.objects.filter(run=run).order_by("id"))
    return RunPage(run, list(top.values()), claims, counts, page, types, drawn, now, signals)


def _leases(run: Run) -> dict[str, float]:
    """Each step's lease length, as this process's settings and the workflow say (the
    workers' should be the same; the timeline ignores a length that does not fit)."""
    workflow = registry.get(run.workflow, run.version)
    if workflow is None:
        return {}
    return {name: engine.lease_for(stepdef) for name, stepdef in workflow.steps.items()}


def _waits(run: Run) -> dict[str, WaitSpec]:
    """The workflow's wait and sleep steps, by name."""
    workflow = registry.get(run.workflow, run.version)
    if workflow is None:
        return {}
    return {name: d.wait for name, d in workflow.steps.items() if d.wait is not None}


def _event_log(
    run: Run, steps: dict[int, Step], number: int | str | None, event_type: str
) -> tuple[Page[Event], list[tuple[str, int]]]:
    """The run's event types with their counts (one query), and one page of its
    events (one query: the counts say how many there are)."""
    types = list(
        Event.objects.filter(run=run).values_list("type").annotate(n=Count("id")).order_by("type")
    )
    counts = dict(types)
    log = Event.objects.filter(run=run).order_by("seq")
    if event_type:
        # Only a type the run has is asked for: anything else (a typo, a NUL character
        # PostgreSQL cannot compare) is simply no event.
        log = log.filter(type=event_type) if event_type in counts else log.none()
    paginator = Paginator(log, EVENTS_PER_PAGE)
    paginator.count = counts.get(event_type, 0) if event_type else sum(counts.values())  # type: ignore[misc]
    page = paginator.get_page(number)
    page.object_list = list(page.object_list)
    for event in page.object_list:
        # The step rows are loaded already: no join, no batch items per event.
        event.step = steps.get(event.step_id) if event.step_id else None  # type: ignore[assignment]
    return page, types


def toggle_url(query: QueryDict, toggle: timeline.Toggle) -> str:
    """The page's query string with one map step's batches shown (or hidden): its
    name in `expand` or `collapse` only where that differs from the default. Empty
    parameters are left out (they say nothing)."""
    params = QueryDict(mutable=True)
    for key, values in query.lists():
        if kept := [v for v in values if v]:
            params.setlist(key, kept)
    expand = [s for s in params.getlist("expand") if s != toggle.step]
    collapse = [s for s in params.getlist("collapse") if s != toggle.step]
    want_open = not toggle.expanded
    if want_open != (toggle.batches <= timeline.AUTO_EXPAND_BATCHES):
        (expand if want_open else collapse).append(toggle.step)
    params.setlist("expand", expand)
    params.setlist("collapse", collapse)
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


SUMMARY_KEYS = (
    "worker",
    "error",
    "reason",
    "outcome",
    "actor",
    "note",
    "resolved_as",
    "resolved_by",
    "items",
    "completed",
    "skipped",
    "batches",
    "delay",
    "retaken",
    "key",
)


def payload_summary(payload: dict[str, Any], limit: int = 160) -> str:
    """One line of the payload's telling fields, for the event log's rows (the whole
    payload is one click away, pretty-printed)."""
    if not isinstance(payload, dict):
        return ""
    parts = []
    for key in SUMMARY_KEYS:
        value = payload.get(key)
        if value is None or value == "" or isinstance(value, dict | list):
            continue
        parts.append(f"{key}: {value}")
    text = " · ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def payload_items(event: Event) -> list[tuple[str, Any]]:
    return sorted(event.payload.items())
