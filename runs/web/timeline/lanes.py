"""Lanes stacked top to bottom under the axis, and the bars drawn on them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from runs.models import Attempt, Step
from runs.pages.words import short

from .geometry import AXIS_H, BAR_H, KEY_CHARS, LANE_H, MIN_BAR_W, PLOT_X1
from .model import Bar, Lane
from .placement import Space
from .rows import Rows
from .scale import Axis


class LaneStack:
    """The lanes drawn so far, and the cursor `y` where the next one goes."""

    def __init__(self) -> None:
        self.lanes: list[Lane] = []
        self.y = float(AXIS_H)

    def add(
        self,
        key: str,
        *,
        kind: str,
        status: str,
        detail: str,
        depth: int = 0,
        title: str = "",
        height: float = LANE_H,
    ) -> Lane:
        """A lane under the last one (every other lane shaded)."""
        label = short(key, KEY_CHARS - 2 * depth)
        lane = Lane(
            key=key,
            label=label,
            title=title or key,
            detail=detail,
            status=status,
            kind=kind,
            depth=depth,
            y=self.y,
            height=height,
            odd=len(self.lanes) % 2 == 0,
        )
        self.y += height
        self.lanes.append(lane)
        return lane


def solid(
    axis: Axis,
    lane: Lane,
    space: Space,
    t0: datetime,
    t1: datetime,
    css: str,
    title: str,
    outcome: str,
) -> Bar:
    """A bar from t0 to t1 (at least MIN_BAR_W wide; past the plot, a stub at its end)."""
    x0 = axis.x(t0)
    x1 = max(axis.x(t1), x0 + MIN_BAR_W)
    if x1 > PLOT_X1 + MIN_BAR_W:
        x0, x1 = PLOT_X1, PLOT_X1 + MIN_BAR_W
    bar = Bar(
        x=x0,
        y=lane.bar_y,
        width=round(x1 - x0, 1),
        height=BAR_H,
        css=css,
        title=title,
        outcome=outcome,
    )
    lane.bars.append(bar)
    space.take(bar.x, bar.x + bar.width)
    return bar


def attempt_title(
    rows: Rows, step: Step, attempt: Attempt, outcome: str, extra: Sequence[str]
) -> str:
    """An attempt's <title>: which attempt, its worker, its times, its error."""
    axis, of = rows.axis, rows.max_attempts_then(step, attempt)
    lines = [
        f"{step.key} · attempt {attempt.number} of {of} · {outcome}",
        f"worker: {attempt.worker or '?'}",
        f"started: {axis.when(attempt.started_at)}",
        *extra,
    ]
    if attempt.error:
        lines.append(f"error: {short(attempt.error, 400)}")
    progress = rows.items.get(attempt.pk)
    if step.parent_id is not None and progress is not None and progress.committed:
        lines.append(f"items committed by this attempt: {progress.committed}")
    return "\n".join(lines)
