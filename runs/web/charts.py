"""The geometry of the reports' charts (templates/includes/chart_*.html draw it as SVG
on the server: no chart library, nothing computed in the browser).

Two shapes. A stepped line per series over time buckets (`steps`), and horizontal bars,
one row per thing, each bar split into segments (`bars`). Every mark carries its number
in a data attribute and a <title>, and the page puts the same numbers in a table beside
it (tests/pages/test_reports.py reads the SVG back and compares).

Sizes are in the viewBox's units; the SVG scales to the width it is given, so the
charts are drawn narrow (a row's label above its bar, not beside it) and their text
large enough to read at a phone's width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

WIDTH = 400.0
# Line charts: the plot's margins (the y axis's numbers on the left, the dates below).
LEFT, RIGHT, TOP, BOTTOM = 40.0, 10.0, 10.0, 30.0
PLOT_HEIGHT = 170.0
# Bars: a row is its label's line, then its bar.
LABEL_LINE, BAR, ROW_GAP = 21.0, 16.0, 12.0
# A row's line above its bar, "label: numbers", is cut to this many characters (the
# label is cut, never the numbers; the whole line is in the row's <title>).
LINE_CHARS = 46
# Lines of different workflows differ by colour and by dash (never colour alone).
LINE_STYLES = 8


def nice_ceiling(value: float) -> float:
    """The top of a count's axis: the smallest of 1, 2, 3, 4, 5, 6, 8, 10 x 10^n at or
    above `value` whose half is a whole number too (the middle gridline), 1 for 1 or less."""
    if value <= 1:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0):
        top = step * power
        if value <= top + 1e-9 and (top / 2).is_integer():
            return top
    return 10.0 * power  # pragma: no cover (10 x 10^n always fits)


def _n(value: float) -> str:
    """A coordinate as written in the SVG: at most two decimals, no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


# --- stepped lines ---------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    x: str
    y: str
    value: int
    title: str


@dataclass(frozen=True)
class Line:
    name: str
    style: int  # 0 .. LINE_STYLES - 1: its colour and dash (durable.css .chart-line-N)
    path: str
    points: list[Point]


@dataclass(frozen=True)
class Tick:
    at: str  # the coordinate across the axis
    label: str
    anchor: str = "end"  # its text's text-anchor


@dataclass
class StepChart:
    width: str
    height: str
    plot_left: str
    y_labels_x: str  # where the y axis's numbers end (right-aligned)
    plot_right: str
    plot_bottom: str
    top: float  # the value at the top of the plot
    lines: list[Line] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)


def steps(
    buckets: Sequence[datetime],
    series: dict[str, list[int]],
    *,
    label: str,
    point_title: str,
) -> StepChart:
    """One stepped line per series: bucket i spans [x_i, x_i+1), the line holds the
    bucket's value across it, and a point marks the value at its end. `label` formats
    a bucket's start for the x axis, `point_title` (with {name}, {start}, {value}) a
    point's title."""
    plot_width = WIDTH - LEFT - RIGHT
    bottom = TOP + PLOT_HEIGHT
    top = nice_ceiling(max((max(v) for v in series.values() if v), default=0))
    n = max(len(buckets), 1)

    def x(i: int) -> float:
        return LEFT + plot_width * i / n

    def y(value: float) -> float:
        return bottom - PLOT_HEIGHT * value / top

    chart = StepChart(
        width=_n(WIDTH),
        height=_n(bottom + BOTTOM),
        plot_left=_n(LEFT),
        y_labels_x=_n(LEFT - 4),
        plot_right=_n(WIDTH - RIGHT),
        plot_bottom=_n(bottom),
        top=top,
    )
    for index, (name, values) in enumerate(series.items()):
        commands = [f"M{_n(x(0))},{_n(y(values[0]))}"] if values else []
        points = []
        for i, value in enumerate(values):
            if i:
                commands.append(f"V{_n(y(value))}")
            commands.append(f"H{_n(x(i + 1))}")
            points.append(
                Point(
                    x=_n(x(i + 1)),
                    y=_n(y(value)),
                    value=value,
                    title=point_title.format(
                        name=name, start=label_of(buckets[i], label), value=value
                    ),
                )
            )
        chart.lines.append(Line(name, index % LINE_STYLES, " ".join(commands), points))
    chart.y_ticks = [Tick(_n(y(v)), _number(v)) for v in sorted({0.0, top / 2, top}) if v == int(v)]
    # First, middle and last bucket: enough to place the line, and room for each.
    shown = sorted({0, (len(buckets) - 1) // 2, len(buckets) - 1}) if buckets else []
    # The first label starts at its tick, the last ends at its tick, any other is centred.
    anchors = ["start", *["middle"] * (len(shown) - 2), "end"] if len(shown) > 1 else ["start"]
    chart.x_ticks = [
        Tick(_n(x(i)), label_of(buckets[i], label), anchor)
        for i, anchor in zip(shown, anchors, strict=True)
    ]
    return chart


def label_of(moment: datetime, fmt: str) -> str:
    return moment.strftime(fmt)


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


# --- horizontal bars -------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    series: str  # its class (durable.css .chart-seg-<series>) and its legend's word
    value: float  # what the mark stands for (data-value)
    x: str
    width: str
    title: str


@dataclass(frozen=True)
class BarRow:
    label: str
    text: str  # the row's numbers, in words
    line: str  # "label: text", the label cut to make it at most LINE_CHARS
    label_y: str  # the baseline of that line
    bar_y: str
    segments: list[Segment]


@dataclass(frozen=True)
class BarChart:
    width: str
    height: str
    bar_height: str
    scale: float  # viewBox units per unit of value
    rows: list[BarRow]


@dataclass(frozen=True)
class Bar:
    """One row to draw: `segments` are (series, length, value, title) laid end to end;
    the length is what the bar's extent is drawn from, the value what its mark says
    (for a percentile bar: the second segment's length is p95 - p50, its value p95)."""

    label: str
    text: str
    segments: list[tuple[str, float, float, str]]


def bars(rows: Sequence[Bar]) -> BarChart:
    """Horizontal bars on one scale: the longest bar spans the whole width; each row's
    label and numbers are on one line above its bar."""
    longest = max((sum(length for _, length, _, _ in r.segments) for r in rows), default=0.0)
    scale = WIDTH / longest if longest > 0 else 0.0
    row_height = LABEL_LINE + BAR + ROW_GAP
    drawn = []
    for i, row in enumerate(rows):
        top = i * row_height
        x, segments = 0.0, []
        for series, length, value, title in row.segments:
            width = length * scale
            segments.append(Segment(series, value, _n(x), _n(width), title))
            x += width
        drawn.append(
            BarRow(
                label=row.label,
                text=row.text,
                line=f"{cut(row.label, LINE_CHARS - len(row.text) - 2)}: {row.text}",
                label_y=_n(top + LABEL_LINE - 5),
                bar_y=_n(top + LABEL_LINE),
                segments=segments,
            )
        )
    height = max(len(rows) * row_height - ROW_GAP, row_height)
    return BarChart(_n(WIDTH), _n(height), _n(BAR), scale, drawn)


def cut(text: str, length: int) -> str:
    """`text`, or its first `length` - 1 characters and an ellipsis (at least one)."""
    length = max(length, 2)
    return text if len(text) <= length else text[: length - 1] + "…"
