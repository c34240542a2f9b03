"""Read-side queries for the run pages: a fixed number of queries per page, whatever
the size of the run (the events are paginated)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Prefetch

from .models import Attempt, Claim, Event, Run, Step

EVENTS_PER_PAGE = 100


@dataclass
class StepRow:
    step: Step
    attempts: list[Attempt]
    claims: list[Claim]
    batches: list[Step] = field(default_factory=list)


@dataclass
class RunPage:
    run: Run
    steps: list[StepRow]
    claims: list[Claim]
    item_counts: dict[str, dict[str, int]]
    events: Page[Event]
    event_types: list[str]


def run_page(run_id: uuid.UUID, *, events_page: int = 1, event_type: str = "") -> RunPage:
    run = Run.objects.get(pk=run_id)
    steps = list(
        Step.objects.filter(run=run)
        .prefetch_related(
            Prefetch("attempt_set", queryset=Attempt.objects.order_by("number")),
        )
        .order_by("id")
    )
    claims = list(
        Claim.objects.filter(run=run, item_key__isnull=True)
        .select_related("attempt")
        .order_by("id")
    )
    by_step: dict[int, list[Claim]] = {}
    for claim in claims:
        by_step.setdefault(claim.step_id, []).append(claim)
    rows: dict[int, StepRow] = {}
    for step in steps:
        row = StepRow(step, list(step.attempt_set.all()), by_step.get(step.id, []))
        if step.parent_id is None:
            rows[step.id] = row
        elif step.parent_id in rows:
            rows[step.parent_id].batches.append(step)
    counts: dict[str, dict[str, int]] = {}
    for name, status in Claim.objects.filter(run=run, item_key__isnull=False).values_list(
        "step__name", "status"
    ):
        per = counts.setdefault(name, {})
        per[status] = per.get(status, 0) + 1
    events = Event.objects.filter(run=run).select_related("step").order_by("seq")
    if event_type:
        events = events.filter(type=event_type)
    types = sorted(set(Event.objects.filter(run=run).values_list("type", flat=True)))
    page = Paginator(events, EVENTS_PER_PAGE).get_page(events_page)
    return RunPage(run, list(rows.values()), claims, counts, page, types)


def payload_items(event: Event) -> list[tuple[str, Any]]:
    return sorted(event.payload.items())
