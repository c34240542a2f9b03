"""The run's own lane, on top: its span, its waits for a decision, who cancelled it and
how it ended."""

from __future__ import annotations

from datetime import datetime

from runs import events as ev
from runs.timefmt import absolute, duration_text

from .geometry import MIN_BAR_W, RUN_LANE_H
from .lanes import LaneStack
from .model import Bar, Marker, Segment, Shape
from .placement import Space
from .rows import Rows
from .shapes import circle, play, square
from .words import json_short, short, word


def run_lane(rows: Rows, stack: LaneStack) -> None:
    """The run itself: a thin bar from submission to its end (or now), the time it
    waited for a decision, who cancelled it, how it ended. Its words go in the upper
    half of the lane, above the bar."""
    run, axis = rows.run, rows.axis
    end = rows.run_end()
    total = (end - run.created_at).total_seconds()
    lane = stack.add(
        "run",
        kind="run",
        status=run.status,
        detail="",
        height=RUN_LANE_H,
        title=f"run {run.pk}: {word(run.status)}",
    )
    above = Space()  # the row of words
    text_y, cy = lane.y + 13, lane.y + 24
    x0, x1 = axis.x(run.created_at), axis.x(end)
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
    lane.bars.append(
        Bar(
            x0,
            cy - 3,
            max(x1 - x0, MIN_BAR_W),
            6,
            f"run-span run-{run.status}",
            "\n".join(lines),
            run.status,
        )
    )
    lane.markers.append(
        Marker(
            x0,
            cy,
            "submitted",
            "mk-submitted",
            f"submitted at {absolute(run.created_at)}\ninput: {json_short(run.input)}",
            [Shape("mk-fill", play(x0 + 3, cy, 6))],
        )
    )
    # Waiting for a decision: from each run_needs_reconciliation to run_resumed.
    waiting_since: datetime | None = None
    bands: list[tuple[datetime, datetime | None]] = []
    for event in rows.marks:
        if event.type == ev.RUN_NEEDS_RECONCILIATION and waiting_since is None:
            waiting_since = event.created_at
        elif event.type == ev.RUN_RESUMED and waiting_since is not None:
            bands.append((waiting_since, event.created_at))
            waiting_since = None
    if waiting_since is not None:
        bands.append((waiting_since, None))
    for since, until in bands:
        stop = until or end
        bx0, bx1 = axis.x(since), max(axis.x(stop), axis.x(since) + MIN_BAR_W)
        state = (
            f"until {axis.when(until)} ({duration_text((until - since).total_seconds())})"
            if until
            else "still waiting"
            if not rows.finished
            else f"until the run finished ({run.status})"
        )
        lane.segments.append(
            Segment(
                bx0,
                cy - 5,
                round(bx1 - bx0, 1),
                10,
                "tl-awaiting",
                f"needs reconciliation: a claim's outcome is unknown and waits for a "
                f"decision\nfrom {axis.when(since)} {state}",
                fill="url(#tl-hatch-awaiting)",
            )
        )
    cancelled = [e for e in rows.marks if e.type == ev.RUN_CANCELLED]
    for event in cancelled:
        x = axis.x(event.created_at)
        cancel = ev.of(event, ev.RunCancelled)
        who, reason = cancel.actor or "?", cancel.reason or ""
        marker = Marker(
            x,
            cy,
            "cancelled",
            "mk-cancelled",
            f"cancelled by {who} at {axis.when(event.created_at)}"
            + (f": {reason}" if reason else ""),
            [Shape("mk-fill", square(x, cy, 4.5))],
        )
        marker.label = above.beside(
            x, text_y, [f"cancelled by {who}", "cancelled"], gap=0, css="tl-label tl-note"
        )
        lane.markers.append(marker)
    if rows.finished and run.finished_at is not None:
        fx = axis.x(run.finished_at)
        marker = Marker(
            fx,
            cy,
            "finished",
            f"mk-finished mk-{run.status}",
            f"run {run.status} at {axis.when(run.finished_at)}, "
            f"{duration_text(total)} after submission"
            + (f"\nerror: {short(run.error, 400)}" if run.error else ""),
            [Shape("mk-fill", circle(fx, cy, 5))],
        )
        if not cancelled:  # "cancelled by …" says it already
            marker.label = above.beside(
                fx,
                text_y,
                [f"{word(run.status)} after {duration_text(total)}", word(run.status)],
                gap=6,
                css=f"tl-label tl-note tl-{run.status}",
            )
        lane.markers.insert(1, marker)
    for since, _ in bands:
        label = above.beside(
            axis.x(since),
            text_y,
            ["needs reconciliation", "decision"],
            gap=0,
            css="tl-label tl-small",
        )
        if label is not None:
            lane.labels.append(label)
