"""What the timeline is drawn from: a run's rows and the few events it reads, indexed
once (steps by parent, attempts by step, marks by step) with the axis they span."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from runs.models import Attempt, Event, Run, Step
from runs.pages.timefmt import humanize_delta
from runs.record import events as ev
from runs.states import RUN_FINISHED
from runs.workflows.definition import WaitSpec

from .scale import Axis, nice_axis

# The only events the timeline reads (everything else comes from the rows): a run's
# log is read by type, never whole. None of these is written per map item.
MARK_TYPES = (
    ev.CLAIM_TAKEN,
    ev.CLAIM_RESOLVED,
    ev.PROBE_INCONCLUSIVE,
    ev.PROBE_GAVE_UP,
    ev.CLAIM_EVIDENCE,
    ev.LATE_RESULT_AFTER_RESOLUTION,
    ev.PROBE_CONTRADICTS_RESOLUTION,
    ev.STEP_REFUSED,
    ev.ATTEMPT_TIMED_OUT,
    ev.STEP_UNRESOLVED,
    ev.RUN_NEEDS_RECONCILIATION,
    ev.RUN_RESUMED,
    ev.RUN_CANCELLED,
    ev.RUN_FAILED,
    ev.RUN_REOPENED,
)
# A map step with at most this many batches shows one lane per batch unless collapsed;
# more, only when expanded, and then at most MAX_BATCH_LANES of them (maps.py).
AUTO_EXPAND_BATCHES = 10
MAX_BATCH_LANES = 50

E = TypeVar("E", bound=ev.Event)


@dataclass(frozen=True)
class ItemProgress:
    """Map items one attempt committed, from their claims (the completed-item
    registry, docs/architecture.md#the-completed-item-registry): how many, and when the last one
    committed."""

    committed: int
    last_at: datetime | None


@dataclass(frozen=True)
class PauseSpan:
    """A pause of the run's workflow (`step` '') or of one step name of it, from its
    audit rows (PauseChange): who paused and why, from when until its resume (None:
    it still stands) and who resumed it."""

    step: str
    actor: str
    reason: str
    since: datetime
    until: datetime | None = None
    resumed_by: str = ""

    @property
    def what(self) -> str:
        return f"step {self.step}" if self.step else "workflow"


@dataclass(frozen=True)
class Source:
    """What the timeline is drawn from, as runs/web/queries.py reads it.

    `steps` are all the run's steps (top-level and batches), `attempts` all their
    attempts, `marks` its events of MARK_TYPES. `items` maps an attempt id to the map
    items it committed; `items_done` a batch's step id to its items done. `leases`:
    each step's lease length, by name, as its workers use it (to date a crashed
    attempt's last lease renewal). `waits`: the workflow's wait and sleep steps, by
    name (their lanes say "wait" or "sleep", not an effect kind, and when a waiting
    one times out). `pauses`: the pauses of its workflow that stood while it ran."""

    run: Run
    steps: Sequence[Step]
    attempts: Sequence[Attempt]
    marks: Sequence[Event]
    items: Mapping[int, ItemProgress] = field(default_factory=dict)
    items_done: Mapping[int, int] = field(default_factory=dict)
    leases: Mapping[str, float] = field(default_factory=dict)
    waits: Mapping[str, WaitSpec] = field(default_factory=dict)
    # The pauses of its workflow that stood while it ran (those of other steps' names
    # are left out here).
    pauses: Sequence[PauseSpan] = ()


@dataclass(frozen=True)
class Shown:
    """Which map steps show their batches, one lane each: a map step with at most
    AUTO_EXPAND_BATCHES of them or named in `expand`, and not one named in `collapse`;
    at most `max_batch_lanes` lanes a map."""

    expand: frozenset[str] = frozenset()
    collapse: frozenset[str] = frozenset()
    max_batch_lanes: int = MAX_BATCH_LANES


class Rows:
    """One run's rows as the timeline reads them, and the axis from its submission to
    the last thing that happened (or now, while it runs)."""

    def __init__(self, source: Source, *, now: datetime, shown: Shown) -> None:
        run, steps, attempts, marks = source.run, source.steps, source.attempts, source.marks
        self.run, self.now = run, now
        self.waits = source.waits
        self.finished = run.status in RUN_FINISHED
        self.items, self.items_done, self.leases = source.items, source.items_done, source.leases
        self.expand, self.collapse = shown.expand, shown.collapse
        self.max_batch_lanes = max(1, shown.max_batch_lanes)
        self.top = sorted((s for s in steps if s.parent_id is None), key=lambda s: s.pk)
        self.batches: dict[int, list[Step]] = defaultdict(list)
        for step in steps:
            if step.parent_id is not None:
                self.batches[step.parent_id].append(step)
        for children in self.batches.values():
            children.sort(key=lambda s: (s.batch_index or 0, s.pk))
        self.steps_by_id = {s.pk: s for s in steps}
        self.attempts: dict[int, list[Attempt]] = defaultdict(list)
        for attempt in attempts:
            self.attempts[attempt.step_id].append(attempt)
        for tries in self.attempts.values():
            tries.sort(key=lambda a: a.number)
        self.marks = sorted(marks, key=lambda e: e.seq)
        # Each event read once, through the catalogue (leniently), for the marks that
        # show its payload. One it cannot read (a field it needs is missing:
        # CatalogueError) or does not know (a newer schema_version: Unknown) is not in
        # `events`: its mark is skipped, as the lenient reader means readers to skip
        # what they cannot read, and the page shows the rest. Its time and type still
        # count (a wait for a decision starts at a step_unresolved, whatever it says).
        self.events: dict[int, ev.Event] = {}
        for row in self.marks:
            if (read := readable(row)) is not None:
                self.events[row.seq] = read
        # The run's reopens (a person's or a bulk batch's retry of its failed steps).
        self.reopens = [
            (row, e) for row in self.marks if (e := self.of(row, ev.RunReopened)) is not None
        ]
        self.step_marks: dict[int, list[Event]] = defaultdict(list)
        for event in self.marks:
            if event.step_id is not None:
                self.step_marks[event.step_id].append(event)
        # Pauses of the whole workflow or of one of the run's steps, while it ran.
        names = {s.name for s in steps}
        self.pauses = [
            p
            for p in sorted(source.pauses, key=lambda p: p.since)
            if (not p.step or p.step in names)
            and p.since <= self.run_end()
            and (p.until is None or p.until >= run.created_at)
        ]
        self.axis: Axis = nice_axis(run.created_at, self.end())

    def end(self) -> datetime:
        """The last moment the drawing shows."""
        times = [self.run.created_at]
        if self.run.finished_at is not None:
            times.append(self.run.finished_at)
        if not self.finished:
            times.append(self.now)
        for tries in self.attempts.values():
            for a in tries:
                times += [
                    a.started_at,
                    a.finished_at or (a.started_at if self.finished else self.now),
                ]
        times += [e.created_at for e in self.marks]
        if not self.finished:
            times += [s.next_attempt_at for s in self.steps_by_id.values() if s.next_attempt_at]
        return max(times)

    def active_end(self) -> datetime:
        """Where something still going on is drawn to: now, or the run's finish."""
        if self.finished and self.run.finished_at is not None:
            return self.run.finished_at
        return self.now

    def run_end(self) -> datetime:
        """Where the run's own span ends: its finish, or now."""
        return self.run.finished_at if self.finished and self.run.finished_at else self.now

    def kind(self, step: Step) -> str:
        """What a step is, in its lane: its effect kind, or "wait" / "sleep" (a wait
        is stored as a pure step, but holds no worker and has no effect)."""
        spec = self.waits.get(step.name) if step.parent_id is None else None
        if spec is None:
            return str(step.kind)
        return "wait" if spec.signal else "sleep"

    def waiting(self, step: Step) -> str:
        """What a waiting step waits for, and when its time is up."""
        spec = self.waits.get(step.name)
        if spec is None:
            return "waiting"
        text = f"waiting for signal “{spec.signal}”" if spec.signal else "asleep"
        if step.wake_at is not None:
            ends = "times out" if spec.signal else "wakes"
            text += f" · {ends} {humanize_delta(self.now - step.wake_at)}"
        return text

    def max_attempts_then(self, step: Step, attempt: Attempt) -> int:
        """The N of "attempt k of N" as it stood when the attempt ran: a reopen raises
        a retried step's max attempts, and records the value before it. A reopen
        recorded before it did (no `max_attempts` in its payload) leaves no trace of
        it: the current value then, as the page said before."""
        for row, reopen in self.reopens:
            if row.created_at >= attempt.started_at and step.key in reopen.steps:
                return (reopen.max_attempts or {}).get(step.key, step.max_attempts)
        return step.max_attempts

    def holding(self, step: Step, since: datetime, until: datetime) -> list[PauseSpan]:
        """The pauses that stood while the step waited from `since` to `until` (a pause
        of its workflow, or of its name: as the start statement decides)."""
        return [
            p
            for p in self.pauses
            if p.step in ("", step.name) and p.since < until and (p.until or self.now) > since
        ]

    def reopen_between(
        self, step: Step, since: datetime, until: datetime
    ) -> tuple[Event, ev.RunReopened] | None:
        """The reopen that retried this step between two of its attempts, if one did."""
        return next(
            (
                (row, reopen)
                for row, reopen in self.reopens
                if since <= row.created_at <= until and step.key in reopen.steps
            ),
            None,
        )

    def event(self, row: Event) -> ev.Event | None:
        """One of `marks` as its catalogue class; None when the catalogue cannot read
        it (its mark is skipped)."""
        return self.events.get(row.seq)

    def of(self, row: Event, cls: type[E]) -> E | None:
        """One of `marks` as `cls`; None when it is not one or cannot be read."""
        event = self.events.get(row.seq)
        return event if isinstance(event, cls) else None

    def step_key(self, event: Event) -> str:
        step = self.steps_by_id.get(event.step_id) if event.step_id is not None else None
        return step.key if step is not None else "a step"


# How a bulk batch's retry names itself in the reason it gives the engine (runs/batches/
# service.py: "<reason> (batch N)"), with the batch's creator as the actor; the event
# names the batch itself too (`batch`), except one written before it did.
BATCH_REASON = re.compile(r"(?P<reason>.*) \(batch (?P<batch>\d+)\)", re.DOTALL)


@dataclass(frozen=True)
class Retried:
    """A reopen in words: `who` ("retried by ann in batch 7"), their reason, the bulk
    batch that did it (if one did)."""

    who: str
    reason: str
    batch: int | None

    @property
    def said(self) -> str:
        return self.who + (f": {self.reason}" if self.reason else "")


def retried_by(reopen: ev.RunReopened) -> Retried:
    reason, batch = reopen.reason, reopen.batch
    if (match := BATCH_REASON.fullmatch(reason)) is not None:
        reason, batch = match["reason"], batch or int(match["batch"])
    who = f"retried by {reopen.actor}" + (f" in batch {batch}" if batch else "")
    return Retried(who, reason, batch)


def readable(row: Event) -> ev.Event | None:
    """The row as its catalogue class, or None when the timeline cannot draw it: its
    payload lacks a field the catalogue needs, or its type is not in the catalogue."""
    try:
        event = ev.read_row(row)
    except ev.CatalogueError:
        return None
    return None if isinstance(event, ev.Unknown) else event


def items_in(step: Step) -> int:
    """Items in a batch: annotated by the page's query (`item_count`, so the items
    themselves are not loaded), or counted from the row."""
    count = getattr(step, "item_count", None)
    if count is not None:
        return int(count)
    return len(step.__dict__.get("items") or [])
