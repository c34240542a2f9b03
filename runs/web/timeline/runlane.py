"""The run's own lane, on top: its span, its waits for a decision, who cancelled it and
how it ended; one function a kind of mark."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from runs.models import Event
from runs.pages.timefmt import absolute, duration_text
from runs.pages.words import json_short, short, word
from runs.record import events as ev

from .geometry import MIN_BAR_W, RUN_LANE_H
from .lanes import LaneStack
from .model import Bar, Lane, Marker, Segment, Shape
from .placement import Space
from .rows import Rows
from .shapes import circle, play, square

# A wait for a decision: from a run_needs_reconciliation to its run_resumed (or none).
Band = tuple[datetime, datetime | None]


@dataclass(frozen=True)
class RunLane:
    """The run's lane as its marks need it: the rows, the lane, the row of words in its
    upper half (`above`, on the baseline `text_y`), the bar's middle `cy`, and where the
    run's span ends (its finish, or now) and how long it is."""

    rows: Rows
    lane: Lane
    above: Space
    text_y: float
    cy: float
    end: datetime
    total: float


def run_lane(rows: Rows, stack: LaneStack) -> None:
    """The run itself: a thin bar from submission to its end (or now), the time it
    waited for a decision, who cancelled it, how it ended. Its words go in the upper
    half of the lane, above the bar."""
    run = rows.run
    end = rows.run_end()
    lane = stack.add(
        "run",
        kind="run",
        status=run.status,
        detail="",
        height=RUN_LANE_H,
        title=f"run {run.pk}: {word(run.status)}",
    )
    at = RunLane(
        rows=rows,
        lane=lane,
        above=Space(),
        text_y=lane.y + 13,
        cy=lane.y + 24,
        end=end,
        total=(end - run.created_at).total_seconds(),
    )
    span(at)
    bands = decision_bands(rows.marks)
    for since, until in bands:
        awaiting(at, since, until)
    # Those the catalogue can read (rows.events): the others are skipped.
    cancelled = [
        (row, cancel) for row in rows.marks if (cancel := rows.of(row, ev.RunCancelled)) is not None
    ]
    for row, cancel in cancelled:
        cancelled_mark(at, row, cancel)
    if rows.finished and run.finished_at is not None:
        finished_mark(at, run.finished_at, labelled=not cancelled)  # "cancelled by …" says it
    for since, _ in bands:
        label = at.above.beside(
            rows.axis.x(since),
            at.text_y,
            ["needs reconciliation", "decision"],
            gap=0,
            css="tl-label tl-small",
        )
        if label is not None:
            lane.labels.append(label)


def span(at: RunLane) -> None:
    """The run's bar, from its submission to its end, and the submission's mark."""
    rows, cy, total = at.rows, at.cy, at.total
    run, axis = rows.run, rows.axis
    x0, x1 = axis.x(run.created_at), axis.x(at.end)
    lines = [
        f"run {run.pk}",
        f"{run.workflow}@{run.version} · {word(run.status)}",
        f"submitted: {absolute(run.created_at)}",
    ]
    if rows.finished and run.finished_at:
        lines.append(f"finished: {axis.when(run.finished_at)}")
        lines.append(f"took: {duration_text(total)}")
    else:
        lines.append(f"running for {duration_text(total)} so far")
    if run.error:
        lines.append(f"error: {run.error}")
    at.lane.bars.append(
        Bar(
            x=x0,
            y=cy - 3,
            width=max(x1 - x0, MIN_BAR_W),
            height=6,
            css=f"run-span run-{run.status}",
            title="\n".join(lines),
            outcome=run.status,
        )
    )
    at.lane.markers.append(
        Marker(
            x=x0,
            y=cy,
            kind="submitted",
            css="mk-submitted",
            title=f"submitted at {absolute(run.created_at)}\ninput: {json_short(run.input)}",
            shapes=[Shape("mk-fill", play(x0 + 3, cy, 6))],
        )
    )


def decision_bands(marks: list[Event]) -> list[Band]:
    """Waiting for a decision: from each run_needs_reconciliation to run_resumed."""
    waiting_since: datetime | None = None
    bands: list[Band] = []
    for event in marks:
        if event.type == ev.RUN_NEEDS_RECONCILIATION and waiting_since is None:
            waiting_since = event.created_at
        elif event.type == ev.RUN_RESUMED and waiting_since is not None:
            bands.append((waiting_since, event.created_at))
            waiting_since = None
    if waiting_since is not None:
        bands.append((waiting_since, None))
    return bands


def awaiting(at: RunLane, since: datetime, until: datetime | None) -> None:
    rows, cy = at.rows, at.cy
    axis = rows.axis
    stop = until or at.end
    bx0, bx1 = axis.x(since), max(axis.x(stop), axis.x(since) + MIN_BAR_W)
    state = (
        f"until {axis.when(until)} ({duration_text((until - since).total_seconds())})"
        if until
        else "still waiting"
        if not rows.finished
        else f"until the run finished ({rows.run.status})"
    )
    at.lane.segments.append(
        Segment(
            x=bx0,
            y=cy - 5,
            width=round(bx1 - bx0, 1),
            height=10,
            css="tl-awaiting",
            title=f"needs reconciliation: a claim's outcome is unknown and waits for a "
            f"decision\nfrom {axis.when(since)} {state}",
            fill="url(#tl-hatch-awaiting)",
        )
    )


def cancelled_mark(at: RunLane, row: Event, cancel: ev.RunCancelled) -> None:
    axis, cy = at.rows.axis, at.cy
    x = axis.x(row.created_at)
    reason = cancel.reason or ""
    when = axis.when(row.created_at)
    # No actor when the run's compensations ended it (`compensated`): say that instead.
    said = (
        f"ended cancelled at {when}, after its compensations"
        if cancel.compensated
        else f"cancelled by {cancel.actor or '?'} at {when}"
    )
    label = (
        "cancelled, compensated" if cancel.compensated else f"cancelled by {cancel.actor or '?'}"
    )
    marker = Marker(
        x=x,
        y=cy,
        kind="cancelled",
        css="mk-cancelled",
        title=said + (f": {reason}" if reason else ""),
        shapes=[Shape("mk-fill", square(x, cy, 4.5))],
    )
    marker.label = at.above.beside(
        x, at.text_y, [label, "cancelled"], gap=0, css="tl-label tl-note"
    )
    at.lane.markers.append(marker)


def finished_mark(at: RunLane, finished_at: datetime, *, labelled: bool) -> None:
    """How the run ended, second among the lane's marks (after its submission)."""
    run, axis, cy, total = at.rows.run, at.rows.axis, at.cy, at.total
    fx = axis.x(finished_at)
    marker = Marker(
        x=fx,
        y=cy,
        kind="finished",
        css=f"mk-finished mk-{run.status}",
        title=f"run {run.status} at {axis.when(finished_at)}, "
        f"{duration_text(total)} after submission"
        + (f"\nerror: {short(run.error, 400)}" if run.error else ""),
        shapes=[Shape("mk-fill", circle(fx, cy, 5))],
    )
    if labelled:
        marker.label = at.above.beside(
            fx,
            at.text_y,
            [f"{word(run.status)} after {duration_text(total)}", word(run.status)],
            gap=6,
            css=f"tl-label tl-note tl-{run.status}",
        )
    at.lane.markers.insert(1, marker)
