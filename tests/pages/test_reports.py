"""The decision reports page (/reports/, runs/web/reports.py): from claim events a test
writes with known times, each table has exactly the numbers those events make; each
chart, read back from its SVG, draws exactly its table's numbers; each CSV carries the
table's rows; an empty period says so; a bad period is refused beside its field (400);
viewers and up may read it; its queries are a fixed number, on the partial index.

The events are written by the test itself (created_at chosen, no run behind them that
its history would reproduce: `tampers`); one test takes a real claim through the
engine (a crash, then an operator's decision) to show the reports read what the engine
writes."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from runs import engine
from runs.models import Event, Run, Step
from runs.web import charts, decisions
from tests.pages.test_query_budgets import LAYOUT
from tests.support.factories import crashed

# The page's queries beyond the layout's: the unresolved levels, and the decisions'
# four reports in one statement (runs/web/decisions.py).
REPORTS_PAGE = 2
# A CSV: the session, the user, the user's role (no layout, no badge), its one read.
REPORT_CSV = 4
PERIOD = "since=2026-03-02&until=2026-03-15"  # two weeks, each from a Monday

pytestmark = pytest.mark.django_db


# --- the events ---------------------------------------------------------------------------


def at(day: int, hour: int = 0, minute: int = 0, month: int = 3) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


class Claims:
    """Writes claim events as the engine would word them, at chosen times."""

    def __init__(self) -> None:
        self.runs: dict[str, tuple[Run, Step]] = {}
        self.n = 0

    def _run(self, workflow: str, step: str) -> tuple[Run, Step]:
        if workflow not in self.runs:
            run = Run.objects.create(workflow=workflow, version=1)
            self.runs[workflow] = (
                run,
                Step.objects.create(run=run, key=step, name=step, kind="guarded"),
            )
        return self.runs[workflow]

    def _event(
        self, run: Run, step: Step, type_: str, payload: dict[str, Any], when: datetime
    ) -> None:
        seq = Event.objects.filter(run=run).count() + 1
        Event.objects.create(
            run=run, seq=seq, type=type_, step=step, payload=payload, created_at=when
        )

    def claim(
        self,
        workflow: str,
        step: str,
        unresolved: datetime,
        resolved: datetime | None = None,
        *,
        by: str = "",
        outcome: str = "succeeded",
    ) -> None:
        run, step_row = self._run(workflow, step)
        self.n += 1
        key = f"{run.id}:{step}:{self.n}"
        self._event(
            run, step_row, "claim_unresolved", {"key": key, "reason": "worker died"}, unresolved
        )
        if resolved is not None:
            payload = {
                "key": key,
                "outcome": outcome,
                "actor": by,
                "note": "checked",
                "evidence": None,
            }
            self._event(run, step_row, "claim_resolved", payload, resolved)


def two_weeks_of_claims() -> None:
    """The claims whose numbers the tests below expect (PERIOD: March 2 to 15)."""
    c = Claims()
    # merge-change · merge
    c.claim("merge-change", "merge", at(20, 9, month=2), at(21, 9, month=2), by="ann")  # before
    c.claim("merge-change", "merge", at(27, 10, month=2), at(3, 10), by="ann")  # 4 days
    c.claim("merge-change", "merge", at(2, 9), at(2, 9, 10), by="probe")  # 10 min
    c.claim("merge-change", "merge", at(4, 12), at(4, 12, 20), by="ann", outcome="failed")  # 20 min
    c.claim("merge-change", "merge", at(10, 8), at(10, 9), by="bob", outcome="failed")  # 1 h
    # charge-payment · charge
    c.claim("charge-payment", "charge", at(5, 0, 30))  # never decided
    c.claim("charge-payment", "charge", at(9, 10), at(16, 10), by="ann")  # decided after
    c.claim("charge-payment", "charge", at(11, 10), at(11, 10, 1), by="probe")  # 1 min
    c.claim("charge-payment", "charge", at(20, 10), at(20, 11), by="ann")  # after


LEVELS = {
    "charge-payment": [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2],
    "merge-change": [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
}
# (workflow, week, decisions, p50, p95): percentile_cont over 4 days, 10 min, 20 min:
# p95 = 1200 + 0.9 * (345600 - 1200).
TIMES = [
    ["charge-payment", "2026-03-09", "1", "60", "60"],
    ["merge-change", "2026-03-02", "3", "1200", "311160"],
    ["merge-change", "2026-03-09", "1", "3600", "3600"],
]
DECIDERS = [["charge-payment", "1", "0", "100"], ["merge-change", "1", "3", "25"]]
OUTCOMES = [["charge-payment · charge", "1", "0"], ["merge-change · merge", "2", "2"]]
OPERATORS = [["ann", "2", "1", "1"], ["bob", "1", "0", "1"]]


# --- reading the page ---------------------------------------------------------------------


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: str = ""

    def all(self, tag: str, **attrs: str) -> list[Node]:
        found = []
        for child in self.children:
            if child.tag == tag and all(
                child.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items()
            ):
                found.append(child)
            found.extend(child.all(tag, **attrs))
        return found

    def one(self, tag: str, **attrs: str) -> Node:
        found = self.all(tag, **attrs)
        assert len(found) == 1, (tag, attrs, len(found))
        return found[0]

    def words(self) -> str:
        return " ".join((self.text + " " + " ".join(c.words() for c in self.children)).split())


VOID = {"input", "meta", "link", "br", "img", "hr"}


class Tree(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__()
        self.root = Node("root", {})
        self.stack = [self.root]
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        while len(self.stack) > 1:
            if self.stack.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        self.stack[-1].text += data


def page(client: Any, query: str = PERIOD) -> Node:
    response = client.get(f"/reports/?{query}")
    assert response.status_code == 200, response.content[:500]
    return Tree(response.content.decode()).root


def section(root: Node, name: str) -> Node:
    return root.one("section", data_report=name)


def table_values(root: Node, name: str) -> tuple[list[str], list[list[str]]]:
    """A report's table: its column headings, and each row's data-values."""
    table = section(root, name).one("table")
    columns = [th.words() for th in table.one("thead").all("th")]
    rows = [
        [cell.attrs["data-value"] for cell in tr.children if cell.tag in ("th", "td")]
        for tr in table.one("tbody").all("tr")
    ]
    return columns, rows


def csv_rows(client: Any, name: str, query: str = PERIOD) -> list[list[str]]:
    response = client.get(f"/reports/{name}.csv?{query}")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="decisions-{name}-2026-03-02-2026-03-15.csv"'
    )
    return list(csv.reader(io.StringIO(response.content.decode())))


# --- the tables have the events' numbers --------------------------------------------------


@pytest.mark.tampers
def test_reports_tables_count_exactly_the_claim_events_of_the_period(viewer_client):
    two_weeks_of_claims()
    root = page(viewer_client)
    assert "From 2026-03-02 to 2026-03-15 (14 days, UTC), counted per day." in root.words()

    columns, rows = table_values(root, "unresolved")
    assert columns == ["Day", "charge-payment", "merge-change"]
    assert [r[0][:10] for r in rows] == [f"2026-03-{d:02d}" for d in range(2, 16)]
    assert [[int(r[1]), int(r[2])] for r in rows] == [
        list(pair) for pair in zip(LEVELS["charge-payment"], LEVELS["merge-change"], strict=True)
    ]
    columns, rows = table_values(root, "time-to-decide")
    assert columns == ["Workflow", "Week of", "Decisions", "Median (p50)", "p95"]
    assert rows == TIMES
    assert "3 d 14 h" in section(root, "time-to-decide").one("tbody").words()  # 311160 s
    assert table_values(root, "deciders") == (
        ["Workflow", "By a probe", "By a person", "Probe's share"],
        DECIDERS,
    )
    assert table_values(root, "outcomes") == (["Workflow · step", "Succeeded", "Failed"], OUTCOMES)
    assert table_values(root, "operators") == (
        ["Operator", "Decisions", "Succeeded", "Failed"],
        OPERATORS,
    )
    # Each table is named by its caption, and each heading is scoped.
    for name in ("unresolved", "time-to-decide", "deciders", "outcomes", "operators"):
        table = section(root, name).one("table")
        assert table.one("caption").words()
        assert {th.attrs.get("scope") for th in table.all("th")} == {"col", "row"}


@pytest.mark.tampers
def test_reports_a_period_of_a_day_or_two_counts_per_hour(viewer_client):
    two_weeks_of_claims()
    root = page(viewer_client, "since=2026-03-09&until=2026-03-10")
    columns, rows = table_values(root, "unresolved")
    assert columns == ["Hour", "charge-payment", "merge-change"]
    assert len(rows) == 48
    by_hour = {r[0][:16]: (int(r[1]), int(r[2])) for r in rows}
    assert by_hour["2026-03-09T09:00"] == (1, 0)  # E since March 5
    assert by_hour["2026-03-09T10:00"] == (2, 0)  # F at 10:00
    assert by_hour["2026-03-10T07:00"] == (2, 0)
    assert by_hour["2026-03-10T08:00"] == (2, 1)  # D at 08:00, decided at 09:00
    assert by_hour["2026-03-10T09:00"] == (2, 0)


# --- the charts draw their tables' numbers ------------------------------------------------


@pytest.mark.tampers
def test_reports_each_chart_draws_its_tables_numbers(viewer_client):
    two_weeks_of_claims()
    root = page(viewer_client)

    # Unresolved: one stepped line per workflow, a point per day at the height of its level.
    svg = section(root, "unresolved").one("svg", **{"class": "report-chart"})
    top, bottom = float(svg.attrs["data-top"]), float(svg.attrs["data-plot-bottom"])
    assert top == 2.0
    _, rows = table_values(root, "unresolved")
    for column, workflow in ((1, "charge-payment"), (2, "merge-change")):
        points = svg.one("g", data_series=workflow).all("circle")
        assert [int(p.attrs["data-value"]) for p in points] == [int(r[column]) for r in rows]
        for p in points:
            drawn = (bottom - float(p.attrs["cy"])) / charts.PLOT_HEIGHT * top
            assert drawn == pytest.approx(int(p.attrs["data-value"]), abs=0.01)
        xs = [float(p.attrs["cx"]) for p in points]
        assert xs == sorted(xs) and len(set(xs)) == len(xs)

    def bars(name: str) -> list[tuple[str, dict[str, tuple[float, float]]]]:
        """Each row's label and, per series, (data-value, drawn width)."""
        chart = section(root, name).one("svg", **{"class": "report-chart"})
        return [
            (
                g.attrs["data-label"],
                {
                    r.attrs["data-series"]: (float(r.attrs["data-value"]), float(r.attrs["width"]))
                    for r in g.all("rect")
                },
            )
            for g in chart.all("g", **{"class": "chart-row"})
        ], float(chart.attrs["data-scale"])

    drawn, scale = bars("time-to-decide")
    _, rows = table_values(root, "time-to-decide")
    assert [label for label, _ in drawn] == [f"{r[0]} · {r[1]}" for r in rows]
    for (_, marks), row in zip(drawn, rows, strict=True):
        p50, p95 = float(row[3]), float(row[4])
        assert marks["p50"] == (p50, pytest.approx(p50 * scale, abs=0.01))
        assert marks["p95"][0] == p95
        assert marks["p50"][1] + marks["p95"][1] == pytest.approx(p95 * scale, abs=0.02)

    drawn, scale = bars("deciders")
    _, rows = table_values(root, "deciders")
    for (label, marks), row in zip(drawn, rows, strict=True):
        probe, person = int(row[1]), int(row[2])
        assert label == row[0]
        assert (marks["probe"][0], marks["person"][0]) == (probe, person)
        share = marks["probe"][1] / (marks["probe"][1] + marks["person"][1])
        assert 100 * share == pytest.approx(float(row[3]), abs=0.01)

    for name, first in (("outcomes", 1), ("operators", 2)):
        drawn, scale = bars(name)
        _, rows = table_values(root, name)
        for (label, marks), row in zip(drawn, rows, strict=True):
            succeeded, failed = int(row[first]), int(row[first + 1])
            assert label == row[0]
            assert marks["succeeded"] == (succeeded, pytest.approx(succeeded * scale, abs=0.01))
            assert marks["failed"] == (failed, pytest.approx(failed * scale, abs=0.01))


# --- the CSVs are the tables' rows --------------------------------------------------------


@pytest.mark.tampers
def test_reports_each_csv_is_its_tables_rows(viewer_client):
    two_weeks_of_claims()
    root = page(viewer_client)
    for name in ("unresolved", "time-to-decide", "deciders", "outcomes", "operators"):
        columns, rows = table_values(root, name)
        assert csv_rows(viewer_client, name) == [columns, *rows], name
        link = section(root, name).one("a", download="")
        assert link.attrs["href"] == f"/reports/{name}.csv?{PERIOD}"
    assert csv_rows(viewer_client, "operators") == [
        ["Operator", "Decisions", "Succeeded", "Failed"],
        ["ann", "2", "1", "1"],
        ["bob", "1", "0", "1"],
    ]
    assert csv_rows(viewer_client, "unresolved")[1] == ["2026-03-02T00:00:00+00:00", "0", "1"]


@pytest.mark.tampers
def test_reports_a_csv_that_starts_like_a_formula_is_quoted_for_spreadsheets(viewer_client):
    """A name a spreadsheet would run as a formula (=, +, -, @) is written with a
    leading apostrophe: a workflow or a username is not trusted input."""
    c = Claims()
    c.claim("=cmd|x", "merge", at(3, 9), at(3, 10), by="@bob")
    rows = csv_rows(viewer_client, "operators")
    assert rows[1] == ["'@bob", "1", "1", "0"]
    assert csv_rows(viewer_client, "outcomes")[1] == ["'=cmd|x · merge", "1", "0"]


# --- empty periods, bad periods, who may read ---------------------------------------------


@pytest.mark.tampers
def test_reports_an_empty_period_says_so_in_each_chart(viewer_client):
    two_weeks_of_claims()
    root = page(viewer_client, "since=2025-01-01&until=2025-01-31")
    for name in ("unresolved", "time-to-decide", "deciders", "outcomes", "operators"):
        part = section(root, name)
        assert part.one("p", **{"class": "chart-empty"}).words() == "No decisions in this period"
        assert not part.all("svg") and not part.all("table")


def test_reports_default_to_the_last_30_days(viewer_client):
    today = timezone.localdate()
    root = page(viewer_client, "")
    assert root.one("input", name="until").attrs["value"] == today.isoformat()
    first = today - timedelta(days=29)
    assert root.one("input", name="since").attrs["value"] == first.isoformat()
    assert f"From {first:%Y-%m-%d} to {today:%Y-%m-%d} (30 days" in root.words()


@pytest.mark.parametrize(
    ("query", "field", "error"),
    [
        ("since=yesterday", "since", "Enter the first day as YYYY-MM-DD"),
        ("until=2026-02-30", "until", "Enter the last day as YYYY-MM-DD"),
        ("since=2026-03-10&until=2026-03-01", "since", "The first day must be on or before"),
        ("since=2024-01-01&until=2026-03-01", "since", "at most 366 days"),
    ],
)
def test_reports_a_bad_period_is_refused_beside_its_field(viewer_client, query, field, error):
    response = viewer_client.get(f"/reports/?{query}")
    assert response.status_code == 400
    root = Tree(response.content.decode()).root
    message = root.one("p", id=f"{field}-error")
    assert error in message.words()
    assert "hidden" not in message.attrs
    assert root.one("input", name=field).attrs["aria-invalid"] == "true"
    assert not root.all("section")  # no charts of a period that is not one
    assert viewer_client.get(f"/reports/operators.csv?{query}").status_code == 400


def test_reports_are_for_viewers_and_up(client, viewer, operator, nobody):
    assert client.get("/reports/").status_code == 302  # to the login page
    assert client.get("/reports/operators.csv").status_code == 302
    client.force_login(nobody)
    assert client.get("/reports/").status_code == 403
    assert client.get("/reports/operators.csv").status_code == 403
    for person in (viewer, operator):
        client.force_login(person)
        assert client.get("/reports/").status_code == 200
        assert client.get("/reports/operators.csv").status_code == 200
    assert client.get("/reports/nothing.csv").status_code == 404


def test_reports_are_in_the_navigation(viewer_client):
    root = page(viewer_client, "")
    link = root.one("nav", aria_label="main").one("a", href="/reports/")
    assert link.words() == "Reports"
    assert link.attrs["aria-current"] == "page"


# --- what the engine writes ---------------------------------------------------------------


def test_reports_read_a_claim_the_engine_made_unresolved_and_an_operator_decided(
    viewer_client, operator
):
    claim = crashed("merge-change")[0]
    engine.resolve_claim(claim.id, "failed", actor=operator, note="the merge is not there")
    root = page(viewer_client, "")
    assert table_values(root, "operators")[1] == [[operator.username, "1", "0", "1"]]
    step = Step.objects.get(pk=claim.step_id).name
    assert table_values(root, "outcomes")[1] == [[f"merge-change · {step}", "0", "1"]]
    assert table_values(root, "deciders")[1] == [["merge-change", "0", "1", "0"]]
    [[workflow, _, decisions_, p50, p95]] = table_values(root, "time-to-decide")[1]
    assert (workflow, decisions_) == ("merge-change", "1")
    assert float(p50) == float(p95) >= 0
    # Decided the day it became unresolved: no day ended with it waiting.
    assert section(root, "unresolved").one("p", **{"class": "chart-empty"}).words() == (
        "No claim was unresolved at the end of a day in this period."
    )


# --- cost ---------------------------------------------------------------------------------


@pytest.mark.tampers
@pytest.mark.parametrize("copies", [1, 4])
def test_reports_make_the_same_queries_whatever_the_number_of_claims(
    viewer_client, django_assert_num_queries, copies
):
    for _ in range(copies):
        two_weeks_of_claims()
    with django_assert_num_queries(LAYOUT + REPORTS_PAGE):
        page(viewer_client)
    with django_assert_num_queries(REPORT_CSV):
        csv_rows(viewer_client, "time-to-decide")


def test_reports_read_the_claim_events_through_their_partial_index(db):
    """With the planner's other ways made dear (the test database is too small for it
    to choose an index on its own), every statement reaches the claim events through
    event_claim_decision_idx."""
    period = decisions.Period(at(2).date(), at(15).date(), UTC)
    params = {**decisions._params(period), "edges": period.buckets()}
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        for name in ("levels", "decisions"):
            cursor.execute("EXPLAIN " + decisions.SQL[name], params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "event_claim_decision_idx" in plan, (name, plan)
