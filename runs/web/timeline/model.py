"""The layout model that the `timeline` partial of templates/runs/detail.html draws:
lanes, bars, segments, marks, guides and ticks, every coordinate decided."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from runs.states import AttemptStatus

from .geometry import (
    AXIS_H,
    BAR_H,
    FOOT_H,
    LABEL_W,
    LABEL_X,
    WIDTH,
    text_width,
)
from .scale import Axis

OUTCOME_WORDS = {
    AttemptStatus.SUCCEEDED: "succeeded",
    AttemptStatus.FAILED: "failed",
    AttemptStatus.CRASHED: "crashed",
    AttemptStatus.UNRESOLVED: "unresolved",
    AttemptStatus.DEFERRED: "deferred",
    AttemptStatus.RUNNING: "running",
}


@dataclass
class Tick:
    x: float
    label: str
    title: str

    @property
    def anchor(self) -> str:
        """Centred on its line, unless that would run off the drawing's right edge."""
        return "end" if self.x + text_width(self.label) / 2 > WIDTH - 2 else "middle"


@dataclass(kw_only=True)
class Label:
    x: float
    y: float
    text: str
    css: str = "tl-label"
    anchor: str = "start"


@dataclass
class Shape:
    css: str
    d: str


@dataclass(kw_only=True)
class Bar:
    """An attempt (or a span of batches): a rectangle, its <title>, maybe a label."""

    x: float
    y: float
    width: float
    height: float
    css: str
    title: str
    outcome: str = ""
    label: Label | None = None


@dataclass(kw_only=True)
class Segment:
    """A stretch of time that is not work: the silence before a crash was noticed, the
    wait for a retry or for a decision. `fill` names an SVG pattern (hatching)."""

    x: float
    y: float
    width: float
    height: float
    css: str
    title: str
    fill: str = ""
    batch: int | None = None  # as Marker.batch

    @property
    def is_line(self) -> bool:
        """Thin stretches are drawn as lines, so they can be dashed or dotted."""
        return self.height <= 2

    @property
    def x2(self) -> float:
        return round(self.x + self.width, 1)

    @property
    def cy(self) -> float:
        return round(self.y + self.height / 2, 1)


@dataclass(kw_only=True)
class Marker:
    x: float
    y: float
    kind: str
    css: str
    title: str
    shapes: list[Shape]
    label: Label | None = None
    # The bulk batch that did it (a run reopened by one): its page is linked.
    batch: int | None = None


@dataclass(frozen=True)
class Detail:
    """One line of the text list under the drawing; `batch`: the words "batch N" in it
    link that batch's page."""

    text: str
    batch: int | None = None

    @property
    def linked(self) -> tuple[str, str, str]:
        """The text around its batch's words: (before, "batch N", after)."""
        words = f"batch {self.batch}"
        before, found, after = self.text.partition(words)
        return (before, words, after) if found and self.batch else (self.text, "", "")


@dataclass
class Lane:
    key: str
    label: str
    title: str
    detail: str
    status: str
    kind: str  # run | step | map | batch | more
    depth: int
    y: float
    height: float
    odd: bool = False  # every other lane is shaded
    bars: list[Bar] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)

    @property
    def mid(self) -> float:
        return self.y + self.height / 2

    @property
    def bar_y(self) -> float:
        return self.y + (self.height - BAR_H) / 2

    @property
    def key_y(self) -> float:
        return self.y + (13 if self.kind == "run" else 14)

    @property
    def sub_y(self) -> float:
        return self.y + self.height - 6

    @property
    def status_word(self) -> str:
        return self.status.replace("_", " ")

    @property
    def text_x(self) -> int:
        return LABEL_X + 14 * self.depth

    @property
    def details(self) -> list[Detail]:
        """What the lane shows, as text, left to right: each bar's, segment's and
        mark's details (their <title>, which only a hover shows), and its words that
        stand on their own. The page lists them under the drawing (a phone has no
        hover; a screen reader reads the drawing's summary only)."""
        placed = [(b.x, Detail(b.title)) for b in self.bars]
        placed += [(s.x, Detail(s.title, s.batch)) for s in self.segments]
        placed += [(m.x, Detail(m.title, m.batch)) for m in self.markers]
        placed += [(t.x, Detail(t.text)) for t in self.labels]
        return [d for _, d in sorted(placed, key=lambda p: p[0]) if d.text]


@dataclass(kw_only=True)
class Guide:
    """A vertical line across the lanes: the run finished here, or now."""

    x: float
    css: str
    title: str
    label: str


@dataclass
class Toggle:
    """A map step whose batches can be shown one lane each (or hidden again)."""

    step: str
    batches: int
    expanded: bool
    shown: int


@dataclass
class Timeline:
    width: int
    height: float
    axis: Axis
    ticks: list[Tick]
    lanes: list[Lane]
    guides: list[Guide]
    toggles: list[Toggle]
    # In words, for screen readers: the drawing's aria-label.
    summary: str
    crashes: int = 0
    # What is drawn (outcomes, kinds of segment and mark), for the legend.
    used: frozenset[str] = frozenset()
    # A crashed attempt's last sign of life, by attempt id (for the steps table too).
    last_seen: dict[int, datetime] = field(default_factory=dict)
    axis_y: float = AXIS_H
    label_width: int = LABEL_W

    @property
    def plot_width(self) -> int:
        return self.width - self.label_width

    @property
    def labels_view_box(self) -> str:
        return f"0 0 {self.label_width} {self.height:g}"

    @property
    def plot_view_box(self) -> str:
        return f"{self.label_width} 0 {self.plot_width} {self.height:g}"

    @property
    def lanes_bottom(self) -> float:
        return self.height - FOOT_H

    @property
    def foot_y(self) -> float:
        return self.height - 7

    @property
    def outcomes(self) -> list[str]:
        """The attempt outcomes drawn, in the legend's order."""
        return [word for word in OUTCOME_WORDS.values() if word in self.used]

    def lane(self, key: str) -> Lane:
        return next(lane for lane in self.lanes if lane.key == key)
