"""Every template line fits in 120 characters, so a person can read a template without
scrolling sideways; a longer line is named by file and line number.

A line is broken where whitespace cannot change the page: between a start tag's
attributes, or beside a block-level element (never inside a `{% %}`/`{{ }}` tag, which
Django reads on one line, an attribute value, <pre>/<textarea>, SVG text or a table
cell). Tests that match markup fold whitespace first (tests/support/markup.py). What
is left is running text with inline markup, whose phrases tests read whole: KNOWN_LONG
counts those lines per file; it may only go down."""

from __future__ import annotations

from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
LIMIT = 120
KNOWN_LONG = {
    "403.html": 1,
    "base.html": 1,
    "includes/worker_attempt.html": 1,
    "reconciliation/claim.html": 1,
    "reconciliation/history.html": 8,
    "reconciliation/oob.html": 1,
    "reconciliation/queue.html": 31,
    "runs/batch.html": 4,
    "runs/bulk.html": 10,
    "runs/detail.html": 32,
    "runs/list.html": 8,
    "runs/new.html": 3,
    "runs/operations.html": 2,
    "runs/overview.html": 5,
    "runs/pauses.html": 4,
    "runs/workers.html": 7,
}


def long_lines(path: Path) -> list[str]:
    return [
        f"templates/{path.relative_to(TEMPLATES)}:{number}: {len(line)} characters"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if len(line) > LIMIT
    ]


def test_no_template_line_is_longer_than_120_characters() -> None:
    paths = sorted(TEMPLATES.rglob("*.html"))
    assert paths, f"no templates found under {TEMPLATES}"
    too_long = []
    for path in paths:
        found = long_lines(path)
        if len(found) > KNOWN_LONG.get(path.relative_to(TEMPLATES).as_posix(), 0):
            too_long += found
    assert not too_long, "template lines over 120 characters:\n" + "\n".join(too_long)


def test_the_known_long_lines_are_still_there() -> None:
    """A file that lost a long line lowers its count here, so it cannot grow a new one."""
    counts = {name: len(long_lines(TEMPLATES / name)) for name in KNOWN_LONG}
    assert counts == KNOWN_LONG
