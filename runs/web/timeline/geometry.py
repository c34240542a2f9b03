"""The drawing's geometry, in SVG user units (the SVG scales to its panel, see
durable.css)."""

from __future__ import annotations

WIDTH = 1000
LABEL_W = 192  # the lanes' names: a drawing of their own, which does not scroll
LABEL_X = 8
PLOT_X0 = 200.0
PLOT_X1 = 972.0
AXIS_H = 30
RUN_LANE_H = 34
LANE_H = 34
BAR_H = 14
FOOT_H = 22
MIN_BAR_W = 4.0
# Widths of a character, generously, for deciding whether a label fits.
CHAR_W = 5.9  # a 10-unit label
KEY_CHARS = 27  # lane keys longer than this are shortened (the full key is in <title>)


def text_width(text: str) -> float:
    return len(text) * CHAR_W
