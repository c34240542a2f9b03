"""The run's own lane, on top: its span, its waits for a decision, who cancelled it and
how it ended; one function a kind of mark."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from runs.models import Event
from runs.pages.timefmt import absolute, duration_text
from runs.pages.words import json_short, plural, short, word
from runs.record import events as ev

from .geometry import MIN_BAR_W, RUN_LANE_H
from .lanes import LaneStack
from .model import Bar, Lane, Marker, Segment, Shape
from .pauses import pause_band
from .placement import Space
from .rows import Rows, retried_by
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
    downs = down_stretches(rows)
    span(at, downs)
    for down in downs:
        failed_then_reopened(at, down)
    for pause in rows.pauses:
        band = pause_band(rows, lane, pause, at.cy)
        label = at.above.beside(
            band.x,
            at.text_y,
            [f"paused by {pause.actor}", "paused"],
            gap=0,
            css="tl-label tl-small tl-paused-label",
        )
        if label is not None:
            lane.labels.append(label)
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


@dataclass(frozen=True)
class Down:
    """The run stood failed: from its run_failed to the reopen that retried it."""

    failed: Event
    error: str
    reopened: Event
    reopen: ev.RunReopened


def down_stretches(rows: Rows) -> list[Down]:
    """Each time the run failed and was reopened (retried) after: the run's span is
    broken there. Its last failure, never reopened, is how it ended (finished_mark)."""
    downs: list[Down] = []
    failed: Event | None = None
    for row in rows.marks:
        if row.type == ev.RUN_FAILED:
            failed = row
        elif failed is not None and (reopen := rows.of(row, ev.RunReopened)) is not None:
            said = rows.of(failed, ev.RunFailed)
            error = (said.error or "") if said is not None else ""
            downs.append(Down(failed, error, row, reopen))
            failed = None
    return downs


def span(at: RunLane, downs: list[Down]) -> None:
    """The run's bar, from its submission to its end (broken where it stood failed
    until a reopen), and the submission's mark."""
    rows, cy, total = at.rows, at.cy, at.total
    run, axis = rows.run, rows.axis
    x0, x1 = axis.x(run.created_at), axis.x(at.end)
    pieces = [run.created_at]
    for down in downs:
        pieces += [down.failed.created_at, down.reopened.created_at]
    pieces.append(at.end)
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
    if downs:
        lines.append(f"failed and reopened {plural(len(downs), 'time', 'times')}")
    for i, (start, stop) in enumerate(zip(pieces[::2], pieces[1::2], strict=True)):
        px0, px1 = axis.x(start), axis.x(stop)
        # The first piece says it all; the others, which stretch of the run they are.
        again = f"run {run.pk}, reopened: from {axis.when(start)}" + (
            f" to {axis.when(stop)}" if i < len(downs) else ""
        )
        at.lane.bars.append(
            Bar(
                x=px0,
                y=cy - 3,
                width=max(px1 - px0, MIN_BAR_W),
                height=6,
                css=f"run-span run-{run.status}",
                title="\n".join(lines) if i == 0 else again,
                outcome=run.status,
            )
        )
    if not downs:
        at.lane.bars[-1].width = max(x1 - x0, MIN_BAR_W)
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


def failed_then_reopened(at: RunLane, down: Down) -> None:
    """A failure that was retried: its mark, the break in the run's span while it stood
    failed, and the reopen's mark (who, their reason, the bulk batch that did it)."""
    axis, cy = at.rows.axis, at.cy
    fx, rx = axis.x(down.failed.created_at), axis.x(down.reopened.created_at)
    failed_at = axis.when(down.failed.created_at)
    retried = retried_by(down.reopen)
    stood = duration_text((down.reopened.created_at - down.failed.created_at).total_seconds())
    failed = Marker(
        x=fx,
        y=cy,
        kind="run-failed",
        css="mk-finished mk-failed",
        title=f"run failed at {failed_at}"
        + (f"\nerror: {short(down.error, 400)}" if down.error else ""),
        shapes=[Shape("mk-fill", circle(fx, cy, 5))],
    )
    failed.label = at.above.beside(
        fx, at.text_y, ["failed"], gap=6, css="tl-label tl-note tl-failed"
    )
    at.lane.markers.append(failed)
    if rx - fx >= 1:
        at.lane.segments.append(
            Segment(
                x=fx,
                y=cy - 1,
                width=round(rx - fx, 1),
                height=2,
                css="tl-down",
                title=f"stood failed for {stood}, from {failed_at} until it was {retried.said}",
                batch=retried.batch,
            )
        )
    reopened = Marker(
        x=rx,
        y=cy,
        kind="reopened",
        css="mk-reopened",
        title=f"{retried.said} at {axis.when(down.reopened.created_at)}\n"
        f"steps retried: {', '.join(down.reopen.steps)}",
        shapes=[Shape("mk-fill", play(rx + 3, cy, 6))],
        batch=retried.batch,
    )
    reopened.label = at.above.beside(
        rx, at.text_y, [retried.who, "retried"], gap=6, css="tl-label tl-note"
    )
    at.lane.markers.append(reopened)


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
