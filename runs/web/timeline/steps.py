"""A step's lane (or a batch's): its attempts, the gaps between them (a retry's wait,
a wait for a decision), what is still to come, and its marks."""

from __future__ import annotations

from datetime import datetime

from runs.models import Attempt, Event, Step
from runs.pages.timefmt import duration_text
from runs.pages.words import short, word
from runs.record import events as ev
from runs.states import AttemptStatus, StepStatus

from .crashes import CrashLog, crashed
from .geometry import BAR_H, PLOT_X0
from .lanes import LaneStack, attempt_title, solid
from .marks import step_mark
from .model import OUTCOME_WORDS, Bar, Label, Lane, Marker, Segment, Shape
from .pauses import held
from .placement import Space, inside
from .rows import Rows, retried_by
from .shapes import circle


def step_lane(rows: Rows, stack: LaneStack, log: CrashLog, step: Step) -> None:
    """A top-level step's lane (a step that is not a map)."""
    kind = rows.kind(step)
    lane = stack.add(
        step.key,
        kind="step",
        status=step.status,
        detail=kind,
        title=f"{step.key} ({kind}): {word(step.status)}",
    )
    step_body(rows, log, lane, step)


def step_body(rows: Rows, log: CrashLog, lane: Lane, step: Step) -> None:
    """The attempts of one step (or batch), the gaps between them and its marks."""
    space = Space()
    tries = rows.attempts.get(step.pk, [])
    marks = rows.step_marks.get(step.pk, [])
    resolutions = [e for e in marks if e.type == ev.CLAIM_RESOLVED]
    taken = {e.attempt_number: e for e in marks if e.type == ev.CLAIM_TAKEN}
    pending_labels: list[tuple[Bar, list[str]]] = []
    previous_end: datetime | None = None
    previous_why = ""
    unresolved = {e.attempt_number: e for e in marks if e.type == ev.STEP_UNRESOLVED}
    for attempt in tries:
        if previous_end is not None:
            gap(rows, lane, previous_end, attempt.started_at, attempt, previous_why)
        if attempt.status == AttemptStatus.CRASHED:
            previous_end, previous_why = crashed(
                rows, log, lane, space, step, attempt, taken.get(attempt.number), pending_labels
            )
        else:
            previous_end, previous_why = attempt_bar(
                rows, lane, space, step, attempt, pending_labels
            )
        became = unresolved.get(attempt.number)
        since = became.created_at if became is not None else None
        if since is None and attempt.status == AttemptStatus.UNRESOLVED:
            since = attempt.finished_at
        if since is not None:
            previous_end, previous_why = awaiting(rows, lane, step, since, resolutions)
    after_last(rows, lane, step, tries, previous_end, previous_why)
    if not tries:
        not_started(rows, lane, step)
    # Labels: inside the bars first, then the marks' labels, then beside narrow bars.
    outside: list[tuple[Bar, list[str]]] = []
    for bar, texts in pending_labels:
        bar.label = inside(bar, texts, lane, "tl-label tl-in")
        if bar.label is None:
            outside.append((bar, texts))
    for event in marks:
        step_mark(rows, lane, space, step, event)
    for bar, texts in outside:
        bar.label = space.beside(
            bar.x + bar.width,
            lane.mid + 3.5,
            texts[-2:],
            gap=4,
            css=f"tl-label tl-{bar.outcome}",
        )


def attempt_bar(
    rows: Rows,
    lane: Lane,
    space: Space,
    step: Step,
    attempt: Attempt,
    pending: list[tuple[Bar, list[str]]],
) -> tuple[datetime, str]:
    axis = rows.axis
    outcome = OUTCOME_WORDS.get(AttemptStatus(attempt.status), attempt.status)
    end = attempt.finished_at or rows.active_end()
    took = duration_text((end - attempt.started_at).total_seconds())
    extra = (
        [f"finished: {axis.when(attempt.finished_at)}", f"duration: {took}"]
        if attempt.finished_at
        else [f"running for {took} so far"]
    )
    bar = solid(
        rows.axis,
        lane,
        space,
        attempt.started_at,
        end,
        f"attempt attempt-{attempt.status}",
        attempt_title(rows, step, attempt, outcome, extra),
        outcome,
    )
    n = attempt.number
    pending.append((bar, [f"#{n} {outcome} · {took}", f"#{n} {outcome}", outcome]))
    why = f"attempt {n} {outcome}" + (f": {short(attempt.error, 120)}" if attempt.error else "")
    return end, why


def awaiting(
    rows: Rows, lane: Lane, step: Step, since: datetime, resolutions: list[Event]
) -> tuple[datetime, str]:
    """An unresolved step waits for a decision (a person's, or its probe's): hatched
    from when it became unresolved to its resolution (flagged by marks.claim_resolved)."""
    axis = rows.axis
    decided = next((e for e in resolutions if e.created_at >= since), None)
    until = decided.created_at if decided is not None else rows.active_end()
    x0 = max(axis.x(since), max((b.x + b.width for b in lane.bars), default=PLOT_X0))
    x1 = max(axis.x(until), x0 + 1)
    # None when the catalogue cannot read the resolution: when it came, not what it said.
    resolution = rows.of(decided, ev.ClaimResolved) if decided is not None else None
    if decided is None:
        state = "still waiting" if not rows.finished else "never decided"
    elif resolution is None:
        state = "until it was resolved"
    else:
        state = f"until {resolution.actor} resolved it as {resolution.outcome}"
    lane.segments.append(
        Segment(
            x=x0,
            y=lane.bar_y + 2,
            width=round(x1 - x0, 1),
            height=BAR_H - 4,
            css="tl-awaiting",
            title=f"{step.key}: the effect's outcome is unknown; waiting for a decision "
            f"from {axis.when(since)} {state}",
            fill="url(#tl-hatch-awaiting)",
        )
    )
    if decided is None:
        return until, "it became unresolved"
    if resolution is None:
        return until, "its claim was resolved"
    return until, f"its claim was resolved as {resolution.outcome} by {resolution.actor}"


def gap(
    rows: Rows, lane: Lane, since: datetime, until: datetime, attempt: Attempt, why: str
) -> None:
    """The wait before a retry: dashed, from the previous attempt's end (or its
    resolution) to the next attempt's start."""
    axis = rows.axis
    x0, x1 = axis.x(since), axis.x(until)
    if x1 - x0 < 1:
        return
    after = f"attempt {attempt.number} started {duration_text((until - since).total_seconds())}"
    step = rows.steps_by_id[attempt.step_id]
    paused = held(rows, lane, step, since, until)
    if paused:  # not the retry's own wait, or not all of it
        after += f" ({paused})"
    # Not a retry of the engine's when a person (or their bulk batch) reopened the run.
    reopened = rows.reopen_between(step, since, until)
    retried = retried_by(reopened[1]) if reopened else None
    lane.segments.append(
        Segment(
            x=x0,
            y=lane.mid - 1,
            width=round(x1 - x0, 1),
            height=2,
            css="tl-retry",
            title=f"{retried.said} at {axis.when(reopened[0].created_at)}\n{after} after {why}"
            if reopened and retried
            else f"retry: {after} after {why}",
            batch=retried.batch if retried else None,
        )
    )


def after_last(
    rows: Rows,
    lane: Lane,
    step: Step,
    tries: list[Attempt],
    last_end: datetime | None,
    why: str,
) -> None:
    """A step still to be tried again: the wait since its last attempt."""
    if rows.finished or last_end is None or not tries:
        return
    axis = rows.axis
    if step.status == StepStatus.RETRYING and step.next_attempt_at is not None:
        due = step.next_attempt_at
        x0, x1 = axis.x(last_end), axis.x(max(due, last_end))
        lane.segments.append(
            Segment(
                x=x0,
                y=lane.mid - 1,
                width=round(max(x1 - x0, 1), 1),
                height=2,
                css="tl-retry tl-pending",
                title=f"retry: attempt {tries[-1].number + 1} is due at {axis.when(due)}, "
                f"after {why}",
            )
        )
        lane.markers.append(
            Marker(
                x=x1,
                y=lane.mid,
                kind="retry-due",
                css="mk-due",
                title=f"{step.key}: next attempt due at {axis.when(due)}",
                shapes=[Shape("mk-ring", circle(x1, lane.mid, 3.5))],
            )
        )
    elif step.status == StepStatus.QUEUED:
        x0, x1 = axis.x(last_end), axis.x(rows.now)
        paused = held(rows, lane, step, last_end, rows.now)
        lane.segments.append(
            Segment(
                x=x0,
                y=lane.mid - 1,
                width=round(max(x1 - x0, 1), 1),
                height=2,
                css="tl-retry tl-pending",
                title=f"queued for attempt {tries[-1].number + 1} since {why}"
                + (f" ({paused})" if paused else ""),
            )
        )


def not_started(rows: Rows, lane: Lane, step: Step) -> None:
    """A step without an attempt: queued since when, or what it waits for."""
    if step.status == StepStatus.QUEUED and step.queued_at is not None and not rows.finished:
        x0, x1 = rows.axis.x(step.queued_at), rows.axis.x(rows.now)
        paused = held(rows, lane, step, step.queued_at, rows.now)
        lane.segments.append(
            Segment(
                x=x0,
                y=lane.mid - 1,
                width=round(max(x1 - x0, 1), 1),
                height=2,
                css="tl-retry tl-pending",
                title=f"{step.key}: queued since {rows.axis.when(step.queued_at)}, "
                "no attempt started yet" + (f" ({paused})" if paused else ""),
            )
        )
        return
    words = {
        StepStatus.PENDING: "not started: waits for "
        + (", ".join(step.depends_on) or "its dependencies"),
        StepStatus.QUEUED: "queued, never started",
        StepStatus.WAITING: rows.waiting(step),
    }
    text = words.get(StepStatus(step.status), step.status.replace("_", " "))
    if step.error:
        text += f" ({short(step.error, 60)})"
    lane.labels.append(
        Label(x=PLOT_X0 + 4, y=lane.mid + 3.5, text=short(text, 120), css="tl-label tl-none")
    )
