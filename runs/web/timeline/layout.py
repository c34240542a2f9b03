"""The timeline of one run, laid out: the run's lane, then a lane per top-level step in
plan order (a map step's with its batches' lanes under it), the axis's ticks, the
guide where the run finished (or now), and the whole in words."""

from __future__ import annotations

from datetime import datetime, timedelta

from runs.pages.timefmt import absolute

from .crashes import CrashLog
from .geometry import FOOT_H, PLOT_X0, PLOT_X1, WIDTH
from .lanes import LaneStack
from .maps import map_lanes
from .model import Guide, Tick, Timeline, Toggle
from .rows import Rows, Shown, Source
from .runlane import run_lane
from .scale import Axis, tick_label
from .steps import step_lane
from .summary import summary, used


def build(source: Source, *, now: datetime, shown: Shown) -> Timeline:
    """The timeline of one run, drawn from `source` as it stood at `now`, with the map
    steps' batches `shown` as the page asks."""
    rows = Rows(source, now=now, shown=shown)
    stack, log = LaneStack(), CrashLog()
    toggles: list[Toggle] = []
    run_lane(rows, stack)
    for step in rows.top:
        batches = rows.batches.get(step.pk, [])
        if batches or step.is_map_parent:
            toggle = map_lanes(rows, stack, log, step, batches)
            if toggle is not None:
                toggles.append(toggle)
        else:
            step_lane(rows, stack, log, step)
    return Timeline(
        width=WIDTH,
        height=stack.y + FOOT_H,
        axis=rows.axis,
        ticks=ticks(rows.axis),
        lanes=stack.lanes,
        guides=guides(rows),
        toggles=toggles,
        summary=summary(rows, log),
        crashes=len(log.crashes),
        used=frozenset(used(stack.lanes)),
        last_seen=log.last_seen,
    )


def ticks(axis: Axis) -> list[Tick]:
    """The axis's ticks, from the run's submission: where each stands and its label."""
    drawn = []
    for i in range(axis.count + 1):
        seconds = i * axis.interval
        t = axis.start + timedelta(seconds=seconds)
        drawn.append(
            Tick(
                x=round(PLOT_X0 + (PLOT_X1 - PLOT_X0) * i / axis.count, 1),
                label=tick_label(seconds, axis.interval, axis.seconds),
                title=absolute(t),
            )
        )
    return drawn


def guides(rows: Rows) -> list[Guide]:
    """The line where the run finished, or where now is."""
    run, axis = rows.run, rows.axis
    if rows.finished and run.finished_at is not None:
        return [
            Guide(
                x=axis.x(run.finished_at),
                css=f"guide guide-{run.status}",
                title=f"run {run.status} at {axis.when(run.finished_at)}",
                label=run.status,
            )
        ]
    return [
        Guide(
            x=axis.x(rows.now),
            css="guide guide-now",
            title=f"now: {axis.when(rows.now)}",
            label="now",
        )
    ]
