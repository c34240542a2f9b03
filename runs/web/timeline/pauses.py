"""Pauses (docs/operating.md#pause-and-resume) as the timeline shows them: in the run's
lane, each pause of its workflow (or of one of its steps) that stood while it ran, who
made it, why and how long; in a step's lane, the stretch of a wait a pause held it back,
so that a pause is not read as a retry's wait."""

from __future__ import annotations

from datetime import datetime

from runs.models import Step
from runs.pages.timefmt import duration_text

from .model import Lane, Segment
from .rows import PauseSpan, Rows


def pause_words(rows: Rows, pause: PauseSpan) -> str:
    """Who paused what and why, from when, until when (and by whom), how long."""
    axis = rows.axis
    end = pause.until or rows.active_end()
    took = duration_text((end - pause.since).total_seconds())
    if pause.until is not None:
        until = f"until {axis.when(pause.until)}" + (
            f", resumed by {pause.resumed_by}" if pause.resumed_by else ""
        )
    else:
        until = "still paused" if not rows.finished else "paused still when the run finished"
    return (
        f"{pause.what} paused by {pause.actor}: {pause.reason}\n"
        f"from {axis.when(pause.since)} {until} ({took})"
    )


def pause_band(rows: Rows, lane: Lane, pause: PauseSpan, cy: float) -> Segment:
    """A pause in the run's lane, over the stretch of the run it stood."""
    axis = rows.axis
    start = max(pause.since, rows.run.created_at)
    stop = min(pause.until or rows.active_end(), rows.run_end())
    x0 = axis.x(start)
    x1 = max(axis.x(stop), x0 + 2)
    segment = Segment(
        x=x0,
        y=cy - 5,
        width=round(x1 - x0, 1),
        height=10,
        css="tl-paused",
        title=pause_words(rows, pause),
    )
    lane.segments.append(segment)
    return segment


def held(rows: Rows, lane: Lane, step: Step, since: datetime, until: datetime) -> str:
    """The pauses that held the step while it waited from `since` to `until`, drawn over
    that wait; in words for the wait's title ("" when none did)."""
    axis = rows.axis
    said = []
    for pause in rows.holding(step, since, until):
        start, stop = max(pause.since, since), min(pause.until or until, until)
        x0, x1 = axis.x(start), axis.x(stop)
        lane.segments.append(
            Segment(
                x=x0,
                y=lane.mid - 3,
                width=round(max(x1 - x0, 2), 1),
                height=6,
                css="tl-paused tl-held",
                title=f"{step.key} held back by a pause for "
                f"{duration_text((stop - start).total_seconds())}: {pause_words(rows, pause)}",
            )
        )
        said.append(f"held back {duration_text((stop - start).total_seconds())} by a pause")
    return "; ".join(said)
