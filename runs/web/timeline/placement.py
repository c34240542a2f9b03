"""Where a label goes: inside its bar, or beside it where the lane has room, or not at
all (a label is drawn only where it can be read; every detail is in a <title>)."""

from __future__ import annotations

from collections.abc import Sequence

from .geometry import PLOT_X0, WIDTH, text_width
from .model import Bar, Label, Lane


class Space:
    """The horizontal stretches of one lane already taken by bars, markers and labels,
    so that a label is drawn only where it can be read."""

    def __init__(self) -> None:
        self.taken: list[tuple[float, float]] = []

    def take(self, x0: float, x1: float) -> None:
        self.taken.append((x0, x1))

    def free(self, x0: float, x1: float) -> bool:
        if x0 < PLOT_X0 - 2 or x1 > WIDTH - 2:
            return False
        return all(x1 <= a + 0.5 or x0 >= b - 0.5 for a, b in self.taken)

    def beside(
        self, x: float, y: float, texts: Sequence[str], *, gap: float, css: str
    ) -> Label | None:
        """The first of `texts` that fits right of x, else left of it; None if none."""
        for text in texts:
            width = text_width(text)
            if self.free(x + gap, x + gap + width):
                self.take(x + gap, x + gap + width)
                return Label(x=x + gap, y=y, text=text, css=css)
            if self.free(x - gap - width, x - gap):
                self.take(x - gap - width, x - gap)
                return Label(x=x - gap, y=y, text=text, css=css, anchor="end")
        return None


def inside(bar: Bar, texts: Sequence[str], lane: Lane, css: str) -> Label | None:
    """The first of `texts` that fits inside the bar, clear of the lane's marks (the
    cross at a crashed attempt's end, a batch's crash on a map's span)."""
    stops = sorted(
        (m.x - 9, m.x + 9)
        for m in lane.markers
        if bar.x - 9 < m.x < bar.x + bar.width + 9 and m.kind != "lease-expired"
    )
    free, start = [], bar.x + 4
    for a, b in stops:
        free.append((start, a))
        start = max(start, b)
    free.append((start, bar.x + bar.width - 4))
    for text in texts:
        for a, b in free:
            if text_width(text) <= b - a:
                return Label(x=round(a, 1), y=lane.mid + 3.5, text=text, css=css)
    return None
