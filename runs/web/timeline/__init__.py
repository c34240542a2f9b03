"""The run timeline (Temporal UI's "compact timeline of its activities"): a pure
function from a run's rows and a few of its events to a layout model, which the
`timeline` partial of templates/runs/detail.html draws as SVG.

Nothing here reads the database or the clock: runs/web/queries.py reads the rows (a
fixed number of queries, whatever the size of the run) and passes `now`. Every
coordinate is decided here, so the page needs no JavaScript and the tests can check
the geometry.

What a stranger should be able to read from it alone:
- one lane per top-level step, in plan order; a map step's lane spans all its batches
  and, expanded, shows one lane per batch (capped; the rest are summarized);
- one bar per attempt, coloured AND labelled by its outcome;
- where a worker died: a crashed attempt's bar ends at its last sign of life (the
  last thing it recorded), marked with a ✕; a hatched stretch follows while its lease
  ran out, then a dotted one until recovery declared it crashed;
- the gap until the next attempt (a retry), the claims taken, probe answers,
  resolutions and who made them, late results, and the run's own marks.

Times are drawn relative to the run's submission ("+1.5 s", "+1 d 2 h") and every
element carries a <title> with the absolute times and the details.

The package, by idea: rows.py (what it is drawn from), scale.py (time to x, ticks),
layout.py (`build`: the lanes top to bottom), runlane.py, steps.py, crashes.py, marks.py,
pauses.py and maps.py (what each lane shows), placement.py (where labels fit), summary.py
(the drawing in words), model.py (what the template draws), geometry.py, shapes.py, words.py.
"""

from .geometry import CHAR_W, MIN_BAR_W, PLOT_X0, PLOT_X1, WIDTH
from .layout import build
from .model import Bar, Detail, Guide, Label, Lane, Marker, Segment, Shape, Tick, Timeline, Toggle
from .rows import (
    AUTO_EXPAND_BATCHES,
    MARK_TYPES,
    MAX_BATCH_LANES,
    ItemProgress,
    PauseSpan,
    Shown,
    Source,
)
from .scale import MAX_TICKS, Axis, nice_axis, tick_label

__all__ = [
    "AUTO_EXPAND_BATCHES",
    "CHAR_W",
    "MARK_TYPES",
    "MAX_BATCH_LANES",
    "MAX_TICKS",
    "MIN_BAR_W",
    "PLOT_X0",
    "PLOT_X1",
    "WIDTH",
    "Axis",
    "Bar",
    "Detail",
    "Guide",
    "ItemProgress",
    "Label",
    "Lane",
    "Marker",
    "PauseSpan",
    "Segment",
    "Shape",
    "Shown",
    "Source",
    "Tick",
    "Timeline",
    "Toggle",
    "build",
    "nice_axis",
    "tick_label",
]
