"""The decision reports page (docs/operating.md#reports): five charts of how claims were
decided over a period, each with its numbers in a table and as a CSV download of the
same rows. The numbers are read by decisions.py, the charts drawn from them by
charts.py; this module parses the period, lays each report out as a table, and answers.

The period is whole days, `since` to `until` included (YYYY-MM-DD, the pages' time
zone); without them, the last 30 days. A date that cannot be read, a since after the
until, or more than MAX_DAYS days is refused beside its field, with 400.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import render
from django.utils import timezone

from runs.pages.access import viewer_required
from runs.pages.http import SignedInRequest
from runs.pages.timefmt import duration_text, trimmed

from . import charts, decisions

DEFAULT_DAYS = 30
MAX_DAYS = 366
PRESETS = (7, 30, 90)
EMPTY = "No decisions in this period"


# --- the period --------------------------------------------------------------------------


@dataclass
class PeriodForm:
    """The period asked for, as typed (to show it again), and what is wrong with it."""

    since: str
    until: str
    errors: dict[str, str] = field(default_factory=dict)
    period: decisions.Period | None = None

    def query(self) -> str:
        """The period as the CSV links and the presets carry it."""
        return f"since={self.since}&until={self.until}"


def _date(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def parse_period(params: QueryDict) -> PeriodForm:
    today = timezone.localdate()
    since_text = params.get("since", "").strip()
    until_text = params.get("until", "").strip()
    errors: dict[str, str] = {}
    until = _date(until_text) if until_text else today
    if until is None:
        errors["until"] = "Enter the last day as YYYY-MM-DD, e.g. 2026-03-31."
    since = _date(since_text) if since_text else (until or today) - timedelta(DEFAULT_DAYS - 1)
    if since is None:
        errors["since"] = "Enter the first day as YYYY-MM-DD, e.g. 2026-03-01."
    elif until is not None and since > until:
        errors["since"] = "The first day must be on or before the last day."
    elif until is not None and (until - since).days + 1 > MAX_DAYS:
        errors["since"] = f"A report covers at most {MAX_DAYS} days; choose a later first day."
    form = PeriodForm(
        since=since_text or (since.isoformat() if since else ""),
        until=until_text or (until.isoformat() if until else ""),
        errors=errors,
    )
    if not errors and since is not None and until is not None:
        form.period = decisions.Period(since, until, timezone.get_current_timezone())
    return form


# --- the tables: what each chart shows, row by row (the CSV is the same rows) -------------


@dataclass(frozen=True)
class Cell:
    text: str  # as the page shows it
    value: str  # as the CSV carries it (and the cell's data-value)


@dataclass(frozen=True)
class Table:
    name: str  # the CSV's name: /reports/<name>.csv
    caption: str
    columns: list[str]
    rows: list[list[Cell]]
    # Columns that hold numbers (right-aligned); the first column heads its row.
    numeric_from: int = 1


def _count(n: int) -> Cell:
    return Cell(f"{n:,}", str(n))


def _seconds(value: float) -> Cell:
    return Cell(duration_text(value), trimmed(value, 1) or "0")


def _bucket_text(levels: decisions.Levels) -> Callable[[Any], str]:
    return (lambda t: f"{t:%Y-%m-%d %H:%M}") if levels.hourly else (lambda t: f"{t:%Y-%m-%d}")


def levels_table(levels: decisions.Levels) -> Table:
    text = _bucket_text(levels)
    rows = [
        [Cell(text(start), start.isoformat()), *(_count(n) for n in values)]
        for start, values in levels.rows()
    ]
    return Table(
        "unresolved",
        "Unresolved claims at the end of each " + ("hour" if levels.hourly else "day"),
        ["Hour" if levels.hourly else "Day", *levels.by_workflow],
        rows if levels.by_workflow else [],
    )


def time_table(found: list[decisions.DecideTime]) -> Table:
    return Table(
        "time-to-decide",
        "Time from unresolved to decided, per workflow and week",
        ["Workflow", "Week of", "Decisions", "Median (p50)", "p95"],
        [
            [
                Cell(r.workflow, r.workflow),
                Cell(r.week.isoformat(), r.week.isoformat()),
                _count(r.decisions),
                _seconds(r.p50),
                _seconds(r.p95),
            ]
            for r in found
        ],
        numeric_from=2,
    )


def deciders_table(found: list[decisions.Deciders]) -> Table:
    return Table(
        "deciders",
        "Claims settled by a probe and by a person, per workflow",
        ["Workflow", "By a probe", "By a person", "Probe's share"],
        [
            [
                Cell(r.workflow, r.workflow),
                _count(r.probe),
                _count(r.person),
                Cell(f"{trimmed(r.probe_share, 1) or '0'} %", trimmed(r.probe_share, 1) or "0"),
            ]
            for r in found
        ],
    )


def outcomes_table(found: list[decisions.Outcomes]) -> Table:
    return Table(
        "outcomes",
        "Decisions per step: the effect happened (succeeded) or not (failed)",
        ["Workflow · step", "Succeeded", "Failed"],
        [
            [
                Cell(f"{r.workflow} · {r.step}", f"{r.workflow} · {r.step}"),
                _count(r.succeeded),
                _count(r.failed),
            ]
            for r in found
        ],
    )


def operators_table(found: list[decisions.OperatorDecisions]) -> Table:
    return Table(
        "operators",
        "Decisions per operator",
        ["Operator", "Decisions", "Succeeded", "Failed"],
        [
            [Cell(r.operator, r.operator), _count(r.total), _count(r.succeeded), _count(r.failed)]
            for r in found
        ],
    )


# --- the charts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Chart:
    """One report on the page: its heading, what it means, its drawing, its table."""

    name: str
    title: str
    about: str
    summary: str  # the SVG's accessible name
    kind: str  # "steps" or "bars": which include draws it
    table: Table
    drawing: charts.StepChart | charts.BarChart | None  # None: nothing to draw
    legend: list[tuple[str, str]]  # (css series, word)
    empty: str = EMPTY  # said instead of the chart when there is nothing to draw


def levels_chart(levels: decisions.Levels) -> Chart:
    table = levels_table(levels)
    fmt = "%m-%d %H:%M" if levels.hourly else "%Y-%m-%d"
    drawing = (
        None
        if levels.empty
        else charts.steps(
            levels.buckets,
            levels.by_workflow,
            label=fmt,
            point_title="{name}, end of {start}: {value} unresolved",
        )
    )
    peak = max((max(v) for v in levels.by_workflow.values()), default=0)
    return Chart(
        name=table.name,
        title="Unresolved claims over time",
        about="Claims waiting for a decision at the end of each "
        + ("hour" if levels.hourly else "day")
        + ", per workflow.",
        summary=f"Unresolved claims per workflow, at most {peak} at the end of one "
        + ("hour" if levels.hourly else "day"),
        kind="steps",
        table=table,
        drawing=drawing,
        legend=[],
        # Decisions, but none left a claim waiting at the end of an hour or a day.
        empty=(
            f"No claim was unresolved at the end of {'an hour' if levels.hourly else 'a day'}"
            " in this period."
            if levels.changed
            else EMPTY
        ),
    )


def _bar_chart(
    table: Table, title: str, about: str, summary: str, rows: list[charts.Bar], legend: Any
) -> Chart:
    return Chart(
        name=table.name,
        title=title,
        about=about,
        summary=summary,
        kind="bars",
        table=table,
        drawing=charts.bars(rows) if rows else None,
        legend=legend,
    )


def time_chart(found: list[decisions.DecideTime]) -> Chart:
    rows = [
        charts.Bar(
            label=f"{r.workflow} · {r.week:%Y-%m-%d}",
            text=f"p50 {duration_text(r.p50)} · p95 {duration_text(r.p95)}",
            segments=[
                ("p50", r.p50, r.p50, f"median (p50): {duration_text(r.p50)}"),
                ("p95", r.p95 - r.p50, r.p95, f"95th percentile (p95): {duration_text(r.p95)}"),
            ],
        )
        for r in found
    ]
    return _bar_chart(
        time_table(found),
        "Time to decide",
        "From the moment a claim became unresolved to its decision: half took no longer "
        "than the median (p50), 95 in 100 no longer than the 95th percentile (p95). "
        "A bar per workflow and week, named by the week's Monday.",
        f"Time to decide per workflow and week, {len(rows)} bars",
        rows,
        [("p50", "median (p50)"), ("p95", "up to the 95th percentile (p95)")],
    )


def deciders_chart(found: list[decisions.Deciders]) -> Chart:
    rows = [
        charts.Bar(
            label=r.workflow,
            text=f"probe {trimmed(r.probe_share, 1) or '0'} %",
            segments=[
                ("probe", r.probe / r.total, r.probe, f"by a probe: {r.probe}"),
                ("person", r.person / r.total, r.person, f"by a person: {r.person}"),
            ],
        )
        for r in found
        if r.total
    ]
    return _bar_chart(
        deciders_table(found),
        "Settled by a probe or a person",
        "Of the claims decided in the period, the share the step's probe settled by "
        "itself, and the share a person decided.",
        f"Share of decisions by a probe and by a person, {len(rows)} workflows",
        rows,
        [("probe", "by a probe"), ("person", "by a person")],
    )


def outcomes_chart(found: list[decisions.Outcomes]) -> Chart:
    rows = [
        charts.Bar(
            label=f"{r.workflow} · {r.step}",
            text=f"{r.succeeded} succeeded · {r.failed} failed",
            segments=[
                ("succeeded", r.succeeded, r.succeeded, f"succeeded: {r.succeeded}"),
                ("failed", r.failed, r.failed, f"failed: {r.failed}"),
            ],
        )
        for r in found
    ]
    return _bar_chart(
        outcomes_table(found),
        "Outcomes per step",
        "What the decisions said: the effect happened (succeeded) or did not (failed).",
        f"Outcomes of the decisions per step, {len(rows)} steps",
        rows,
        [("succeeded", "succeeded"), ("failed", "failed")],
    )


def operators_chart(found: list[decisions.OperatorDecisions]) -> Chart:
    rows = [
        charts.Bar(
            label=r.operator,
            text=f"{r.total} ({r.succeeded} succeeded · {r.failed} failed)",
            segments=[
                ("succeeded", r.succeeded, r.succeeded, f"succeeded: {r.succeeded}"),
                ("failed", r.failed, r.failed, f"failed: {r.failed}"),
            ],
        )
        for r in found
    ]
    return _bar_chart(
        operators_table(found),
        "Decisions per operator",
        "Claims each person decided (a probe's decisions are in the chart above).",
        f"Decisions per operator, {len(rows)} operators",
        rows,
        [("succeeded", "succeeded"), ("failed", "failed")],
    )


def page_charts(report: decisions.Report) -> list[Chart]:
    return [
        levels_chart(report.levels),
        time_chart(report.time_to_decide),
        deciders_chart(report.deciders),
        outcomes_chart(report.outcomes),
        operators_chart(report.operators),
    ]


# One read per CSV: only the numbers of that table.
CSV_TABLES: dict[str, Callable[[decisions.Period], Table]] = {
    "unresolved": lambda p: levels_table(decisions.levels(p)),
    "time-to-decide": lambda p: time_table(decisions.decided(p).time_to_decide),
    "deciders": lambda p: deciders_table(decisions.decided(p).deciders),
    "outcomes": lambda p: outcomes_table(decisions.decided(p).outcomes),
    "operators": lambda p: operators_table(decisions.decided(p).operators),
}


# --- the views ----------------------------------------------------------------------------


def _presets(today: date) -> list[tuple[str, str]]:
    return [
        (f"Last {days} days", f"since={today - timedelta(days - 1)}&until={today}")
        for days in PRESETS
    ]


@viewer_required
def reports_page(request: SignedInRequest) -> HttpResponse:
    form = parse_period(request.GET)
    context: dict[str, Any] = {
        "form": form,
        "presets": _presets(timezone.localdate()),
        "empty": EMPTY,
        "charts": page_charts(decisions.report(form.period)) if form.period else [],
    }
    return render(request, "runs/reports.html", context, status=400 if form.errors else 200)


@viewer_required
def report_csv(request: SignedInRequest, name: str) -> HttpResponse:
    read = CSV_TABLES.get(name)
    if read is None:
        raise Http404(f"no report named {name!r}")
    form = parse_period(request.GET)
    if form.period is None:
        message = "; ".join(f"{k}: {v}" for k, v in sorted(form.errors.items()))
        return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")
    table = read(form.period)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    filename = f"decisions-{name}-{form.period.first}-{form.period.last}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(
        [
            _spreadsheet_safe(c.value) if i < table.numeric_from else c.value
            for i, c in enumerate(row)
        ]
        for row in table.rows
    )
    return response


# A spreadsheet runs a cell that starts with one of these as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _spreadsheet_safe(text: str) -> str:
    """A name (a workflow, a step, a username) as a CSV cell a spreadsheet shows as text:
    one that would start a formula gets a leading apostrophe (OWASP, CSV injection)."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text
