"""The event log as a second source of truth (docs/architecture.md#history-and-restore).

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

from django.db import connections, transaction
from django.db.models import Count

from runs import sql
from runs.models import Claim, Event, MapRegistry, Run, RunHistorySummary, Step
from runs.record import events as ev
from runs.sql import routing
from runs.states import ClaimStatus, RunStatus, StepStatus

SQL = sql.load(__file__)

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

    def to_json(self) -> dict[str, Any]:
        return {
            "run_status": self.run_status,
            "steps": self.steps,
            "claims": self.claims,
            "batches": {k: list(v) for k, v in self.batches.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Projection:
        return cls(
            run_status=data.get("run_status"),
            steps=dict(data.get("steps", {})),
            claims=dict(data.get("claims", {})),
            batches={k: (v[0], v[1], v[2]) for k, v in data.get("batches", {}).items()},
        )


# The classes of the events STEP_STATUS_BY_EVENT and CLAIM_STATUS_BY_EVENT name: each has
# the field (`step`, `key`) the projection files it under (a test keeps the two alike).
_STEP_EVENTS = (
    ev.StepQueued,
    ev.StepStarted,
    ev.StepSucceeded,
    ev.StepRetrying,
    ev.StepFailed,
    ev.StepUnresolved,
    ev.StepWaiting,
    ev.StepSkipped,
)
_CLAIM_EVENTS = (
    ev.ClaimTaken,
    ev.ClaimSucceeded,
    ev.ClaimFailed,
    ev.ClaimUnresolved,
    ev.ClaimAbandoned,
)


def fold(
    p: Projection, type: str, data: dict[str, Any], schema_version: int = Event.SCHEMA_VERSION
) -> None:
    """Apply one stored event to the projection (read through the catalogue)."""
    apply(p, ev.read(type, data, schema_version))


def apply(p: Projection, event: ev.Event) -> None:
    """Apply one event to the projection."""
    type = event.TYPE
    if type in RUN_STATUS_BY_EVENT:
        p.run_status = RUN_STATUS_BY_EVENT[type]
    elif isinstance(event, ev.RunReopened):
        p.run_status = event.status
    if isinstance(event, ev.RunSubmitted):
        for planned in event.plan:
            p.steps[planned["key"]] = StepStatus.PENDING
    elif isinstance(event, ev.CompensationPlanned):
        p.steps[event.step] = event.status
    elif isinstance(event, _STEP_EVENTS):
        p.steps[event.step] = STEP_STATUS_BY_EVENT[type]
    elif isinstance(event, ev.StepsWithdrawn):
        for key in event.steps:
            p.steps[key] = StepStatus.PENDING
    elif isinstance(event, ev.PlanExpanded):
        parent = event.step
        p.steps[parent] = StepStatus.RUNNING
        for index in range(event.batches):
            p.steps[f"{parent}[{index}]"] = StepStatus.QUEUED
    elif isinstance(event, _CLAIM_EVENTS):
        p.claims[event.key] = CLAIM_STATUS_BY_EVENT[type]
    elif isinstance(event, ev.ClaimResolved):
        p.claims[event.key] = event.outcome
    if isinstance(event, ev.BatchFinished):
        p.batches[event.step] = (event.items, event.completed, event.skipped)


def project(run_id: Any) -> Projection:
    """The projection of the run's events. A run whose older events retention removed
    starts from the projection its RunHistorySummary kept of them, then folds the
    events that remain (appended after the purge)."""
    summary = RunHistorySummary.objects.filter(run_id=run_id).first()
    p = Projection() if summary is None else Projection.from_json(summary.projection)
    after = 0 if summary is None else summary.last_seq
    for e in Event.objects.filter(run_id=run_id, seq__gt=after).order_by("seq").iterator():
        fold(p, e.type, e.payload, e.schema_version)
    return p


@contextmanager
def snapshot() -> Iterator[None]:
    """One REPEATABLE READ, read-only transaction: every query inside sees the database
    as of its first one, so a run that moves on meanwhile is read whole, not half
    before and half after. (Inside an already open transaction, e.g. a test's, the
    isolation level can no longer be set; that transaction's own rules apply.)"""
    # On the database this block reads from: a reading page's snapshot is the replica's.
    alias = routing.reads_alias()
    if connections[alias].in_atomic_block:
        yield
        return
    with transaction.atomic(using=alias):
        with connections[alias].cursor() as cursor:
            cursor.execute(SQL["snapshot"])
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
    problems: list[str] = _summary_differences(run)
    if p.run_status != run.status:
        problems.append(f"run: rows say {run.status}, events say {p.run_status}")
    steps = {s.key: s for s in Step.objects.filter(run=run)}
    for key in sorted(set(steps) | set(p.steps)):
        row = steps[key].status if key in steps else None
        if row != p.steps.get(key):
            problems.append(f"step {key}: rows say {row}, events say {p.steps.get(key)}")
    if run.claims_purged_at is not None:
        # Past its dedup window retention removed the run's claims (and its map
        # registries): the events' claim outcomes have no rows left to compare with.
        return problems
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
    registries = {r.step_id: r for r in MapRegistry.objects.filter(run=run)}
    for key, step in sorted(steps.items()):
        if step.parent_id is None or step.status != StepStatus.SUCCEEDED:
            continue
        if key not in p.batches:
            problems.append(f"batch {key}: succeeded but no batch_finished event")
            continue
        items, completed, skipped = p.batches[key]
        expected = len(step.items or [])
        registry = registries.get(step.parent_id)
        covered = 0 if registry is None else _covered(registry, step)
        found = done.get(key, 0) + covered
        if (items, completed + skipped, found) != (expected,) * 3:
            problems.append(
                f"batch {key}: {expected} items; events say {completed} completed + "
                f"{skipped} skipped of {items}; registry has {found} completed items"
            )
    return problems


def _covered(registry: MapRegistry, batch: Step) -> int:
    """Items of the batch that the compacted registry counts as completed."""
    assert batch.batch_index is not None
    start = batch.batch_index * registry.batch_size
    return sum(registry.covers(start + i, pair["key"]) for i, pair in enumerate(batch.items or []))


def _summary_differences(run: Run) -> list[str]:
    """A compacted run: the summary must account for exactly the events that are gone
    (seq 1 up to its last_seq, as many as its counts say), and the events that remain
    must follow it without a gap up to the run's last_seq."""
    summary = RunHistorySummary.objects.filter(run=run).first()
    if summary is None:
        if run.compacted_at is not None:
            return ["history: the run is marked compacted but has no summary of removed events"]
        return []
    remaining = list(Event.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    problems: list[str] = []
    counted = sum(int(n) for n in summary.counts.values())
    span = summary.last_seq - summary.first_seq + 1
    if (summary.first_seq, summary.events_removed, counted) != (1, span, span):
        problems.append(
            f"history: summary says {summary.events_removed} events removed "
            f"(counted by type: {counted}) for seq {summary.first_seq}..{summary.last_seq}"
        )
    expected = list(range(summary.last_seq + 1, run.last_seq + 1))
    if remaining != expected:
        problems.append(
            f"history: after the summary (up to seq {summary.last_seq}) the events left "
            f"should be seq {summary.last_seq + 1}..{run.last_seq}, found {len(remaining)}"
        )
    return problems
