"""The event log as a second source of truth (DESIGN.md §8).

project() rebuilds, from a run's events alone, its status, its steps' statuses, its
step claims' outcomes and its batches' item counts; verify_run() compares that with
the live rows. A difference means a row was changed behind the engine's back (or the
engine forgot an event), which is exactly what `manage.py verify_history` reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models import Count

from . import events as ev
from .models import Claim, Event, Run, Step
from .states import ClaimStatus, RunStatus, StepStatus

STEP_STATUS_BY_EVENT = {
    ev.STEP_QUEUED: StepStatus.QUEUED,
    ev.STEP_STARTED: StepStatus.RUNNING,
    ev.STEP_SUCCEEDED: StepStatus.SUCCEEDED,
    ev.STEP_RETRYING: StepStatus.RETRYING,
    ev.STEP_FAILED: StepStatus.FAILED,
    ev.STEP_UNRESOLVED: StepStatus.UNRESOLVED,
    ev.STEP_WAITING: StepStatus.WAITING,
    ev.STEP_SKIPPED: StepStatus.SKIPPED,
}
CLAIM_STATUS_BY_EVENT = {
    ev.CLAIM_TAKEN: ClaimStatus.IN_FLIGHT,
    ev.CLAIM_SUCCEEDED: ClaimStatus.SUCCEEDED,
    ev.CLAIM_FAILED: ClaimStatus.FAILED,
    ev.CLAIM_UNRESOLVED: ClaimStatus.UNRESOLVED,
    ev.CLAIM_ABANDONED: ClaimStatus.ABANDONED,
}
RUN_STATUS_BY_EVENT = {
    ev.RUN_SUBMITTED: RunStatus.PENDING,
    ev.RUN_STARTED: RunStatus.RUNNING,
    ev.RUN_RESUMED: RunStatus.RUNNING,
    ev.RUN_NEEDS_RECONCILIATION: RunStatus.NEEDS_RECONCILIATION,
    ev.RUN_SUCCEEDED: RunStatus.SUCCEEDED,
    ev.RUN_FAILED: RunStatus.FAILED,
    ev.RUN_CANCELLED: RunStatus.CANCELLED,
    ev.RUN_WAITING: RunStatus.WAITING,
    ev.RUN_WOKEN: RunStatus.RUNNING,
    ev.RUN_COMPENSATING: RunStatus.COMPENSATING,
}


@dataclass
class Projection:
    run_status: str | None = None
    steps: dict[str, str] = field(default_factory=dict)
    claims: dict[str, str] = field(default_factory=dict)
    # batch key -> (items, completed, skipped) from its last batch_finished event
    batches: dict[str, tuple[int, int, int]] = field(default_factory=dict)


def project(run_id: Any) -> Projection:
    p = Projection()
    for e in Event.objects.filter(run_id=run_id).order_by("seq").iterator():
        data = e.payload
        if e.type in RUN_STATUS_BY_EVENT:
            p.run_status = RUN_STATUS_BY_EVENT[e.type]
        elif e.type == ev.RUN_REOPENED:
            p.run_status = data["status"]
        if e.type == ev.RUN_SUBMITTED:
            for planned in data.get("plan", []):
                p.steps[planned["key"]] = StepStatus.PENDING
        elif e.type == ev.COMPENSATION_PLANNED:
            p.steps[data["step"]] = data["status"]
        elif e.type in STEP_STATUS_BY_EVENT:
            p.steps[data["step"]] = STEP_STATUS_BY_EVENT[e.type]
        elif e.type == ev.PLAN_EXPANDED:
            parent = data["step"]
            p.steps[parent] = StepStatus.RUNNING
            for index in range(data["batches"]):
                p.steps[f"{parent}[{index}]"] = StepStatus.QUEUED
        elif e.type in CLAIM_STATUS_BY_EVENT:
            p.claims[data["key"]] = CLAIM_STATUS_BY_EVENT[e.type]
        elif e.type == ev.CLAIM_RESOLVED:
            p.claims[data["key"]] = data["outcome"]
        if e.type == ev.BATCH_FINISHED:
            p.batches[data["step"]] = (data["items"], data["completed"], data["skipped"])
    return p


@contextmanager
def snapshot() -> Iterator[None]:
    """One REPEATABLE READ, read-only transaction: every query inside sees the database
    as of its first one, so a run that moves on meanwhile is read whole, not half
    before and half after. (Inside an already open transaction, e.g. a test's, the
    isolation level can no longer be set; that transaction's own rules apply.)"""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def verify_run(run: Run | Any) -> list[str]:
    """Differences between the projection of the run's events and its rows, all read
    from one snapshot (a live run is not reported broken for moving on meanwhile)."""
    run_id = run.pk if isinstance(run, Run) else run
    with snapshot():
        run = Run.objects.get(pk=run_id)
        return _differences(run)


def _differences(run: Run) -> list[str]:
    p = project(run.id)
    problems: list[str] = []
    if p.run_status != run.status:
        problems.append(f"run: rows say {run.status}, events say {p.run_status}")
    steps = {s.key: s for s in Step.objects.filter(run=run)}
    for key in sorted(set(steps) | set(p.steps)):
        row = steps[key].status if key in steps else None
        if row != p.steps.get(key):
            problems.append(f"step {key}: rows say {row}, events say {p.steps.get(key)}")
    claims = dict(Claim.objects.filter(run=run, item_key__isnull=True).values_list("key", "status"))
    for key in sorted(set(claims) | set(p.claims)):
        if claims.get(key) != p.claims.get(key):
            problems.append(
                f"claim {key}: rows say {claims.get(key)}, events say {p.claims.get(key)}"
            )
    done = dict(
        Claim.objects.filter(run=run, item_key__isnull=False, status=ClaimStatus.SUCCEEDED)
        .values("step__key")
        .annotate(n=Count("id"))
        .values_list("step__key", "n")
    )
    for key, step in sorted(steps.items()):
        if step.parent_id is None or step.status != StepStatus.SUCCEEDED:
            continue
        if key not in p.batches:
            problems.append(f"batch {key}: succeeded but no batch_finished event")
            continue
        items, completed, skipped = p.batches[key]
        expected = len(step.items or [])
        if (items, completed + skipped, done.get(key, 0)) != (expected,) * 3:
            problems.append(
                f"batch {key}: {expected} items; events say {completed} completed + "
                f"{skipped} skipped of {items}; registry has {done.get(key, 0)} succeeded claims"
            )
    return problems
