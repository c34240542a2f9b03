"""Time to x: the axis from the run's submission to its last tick, in nice intervals,
and the ticks' labels, relative to the submission ("+1.5 s", "+1 d 2 h")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from runs.pages.timefmt import absolute, compound, duration_text, trimmed

from .geometry import PLOT_X0, PLOT_X1

MAX_TICKS = 8
# Tick intervals that read well, in seconds: ms, s, min, h, days, weeks.
NICE_INTERVALS = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
    1, 2, 5, 10, 15, 30,
    60, 120, 300, 600, 900, 1800,
    3600, 7200, 10800, 21600, 43200,
    86400, 172800, 604800, 1209600, 2419200,
)  # fmt: skip


def tick_label(seconds: float, interval: float, total: float) -> str:
    """A tick's label, relative to the run's submission: milliseconds on an axis of at
    most a second, decimal seconds when the ticks are less than a second apart, whole
    units otherwise (`+1.5 s`, `+10 min`, `+1 d 2 h`)."""
    if seconds <= 0:
        return "0"
    if interval < 1:
        if total <= 1:
            return f"+{seconds * 1000:.0f} ms"
        return f"+{trimmed(seconds, 1 if interval >= 0.1 else 2)} s"
    return f"+{compound(seconds)}"


@dataclass(frozen=True)
class Axis:
    """From the run's submission to the last tick: `count` intervals of `interval` s."""

    start: datetime
    interval: float
    count: int

    @property
    def seconds(self) -> float:
        return self.interval * self.count

    def offset(self, t: datetime) -> float:
        return (t - self.start).total_seconds()

    def x(self, t: datetime) -> float:
        fraction = min(max(self.offset(t) / self.seconds, 0.0), 1.0)
        return round(PLOT_X0 + fraction * (PLOT_X1 - PLOT_X0), 1)

    def relative(self, t: datetime) -> str:
        seconds = self.offset(t)
        return f"{'-' if seconds < 0 else '+'}{duration_text(abs(seconds))}"

    def when(self, t: datetime) -> str:
        """`2025-01-31 12:00:03.512 UTC (+3.51 s)`."""
        return f"{absolute(t)} ({self.relative(t)})"


def nice_axis(start: datetime, end: datetime) -> Axis:
    """At most MAX_TICKS intervals of a nice length, the last tick at or after `end`."""
    span = max((end - start).total_seconds(), 0.01)
    target = span / MAX_TICKS
    interval = next((float(n) for n in NICE_INTERVALS if n >= target - 1e-12), None)
    if interval is None:
        interval = 604800.0 * math.ceil(target / 604800)
    count = max(1, math.ceil(span / interval - 1e-9))
    return Axis(start, interval, count)
