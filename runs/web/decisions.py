"""The read side of the decision reports (docs/operating.md#reports): how many claims
waited for a decision over a period, how long deciding took, who decided (a probe or a
person, and which person) and what was decided, per workflow and step.

Everything is computed from the event log, by two statements (decisions.sql) that each
start from the partial index event_claim_decision_idx, whatever the size of the log
around the claim events: the page's query budget is the layout's and two
(tests/pages/test_reports.py). Numbers only; the charts are drawn by charts.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any

from runs import sql
from runs.record import events
from runs.sql import routing
from runs.states import ClaimStatus

SQL = sql.load(__file__)

# The actor a probe's resolution is recorded under (the engine's PROBE_ACTOR; the run
# page's timeline tells a probe's flag apart the same way). A person named "probe"
# would be counted as the probe: usernames are recorded as they are.
PROBE = "probe"
# Up to this many days, the unresolved claims are counted per hour; beyond, per day.
HOURLY_UP_TO_DAYS = 2


@dataclass(frozen=True)
class Period:
    """Whole days, `first` to `last` included, in the time zone `tz`."""

    first: date
    last: date
    tz: tzinfo

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    @property
    def since(self) -> datetime:
        return datetime.combine(self.first, time(), tzinfo=self.tz)

    @property
    def until(self) -> datetime:
        """The first moment after the period (the next day's midnight)."""
        return datetime.combine(self.last + timedelta(days=1), time(), tzinfo=self.tz)

    @property
    def hourly(self) -> bool:
        return self.days <= HOURLY_UP_TO_DAYS

    def buckets(self) -> list[datetime]:
        """The start of each bucket: each hour (in UTC steps, so a day that changes the
        clock has 23 or 25) or each day's midnight."""
        if self.hourly:
            start = self.since.astimezone(UTC)
            hours = int((self.until - self.since).total_seconds() // 3600)
            return [(start + timedelta(hours=h)).astimezone(self.tz) for h in range(hours)]
        return [
            datetime.combine(self.first + timedelta(days=d), time(), tzinfo=self.tz)
            for d in range(self.days)
        ]


@dataclass(frozen=True)
class Levels:
    """Unresolved claims per workflow at the end of each bucket."""

    buckets: list[datetime]
    hourly: bool
    by_workflow: dict[str, list[int]]
    changed: bool  # a claim became unresolved or was decided in the period

    @property
    def empty(self) -> bool:
        """Nothing unresolved at any time of the period: nothing to draw."""
        return not any(any(levels) for levels in self.by_workflow.values())

    def rows(self) -> list[tuple[datetime, list[int]]]:
        """(bucket start, the level of each workflow in by_workflow's order)."""
        series = list(self.by_workflow.values())
        return [(start, [s[i] for s in series]) for i, start in enumerate(self.buckets)]


@dataclass(frozen=True)
class DecideTime:
    workflow: str
    week: date  # its Monday
    decisions: int
    p50: float  # seconds
    p95: float


@dataclass(frozen=True)
class Deciders:
    workflow: str
    probe: int
    person: int

    @property
    def total(self) -> int:
        return self.probe + self.person

    @property
    def probe_share(self) -> float:
        """The probe's share in percent."""
        return 100.0 * self.probe / self.total if self.total else 0.0


@dataclass(frozen=True)
class Outcomes:
    workflow: str
    step: str
    succeeded: int
    failed: int

    @property
    def total(self) -> int:
        return self.succeeded + self.failed


@dataclass(frozen=True)
class OperatorDecisions:
    operator: str
    succeeded: int
    failed: int

    @property
    def total(self) -> int:
        return self.succeeded + self.failed


@dataclass(frozen=True)
class Report:
    period: Period
    levels: Levels
    time_to_decide: list[DecideTime]
    deciders: list[Deciders]
    outcomes: list[Outcomes]
    operators: list[OperatorDecisions]


def _params(period: Period) -> dict[str, Any]:
    return {
        "since": period.since,
        "until": period.until,
        "unresolved": events.ClaimUnresolved.TYPE,
        "resolved": events.ClaimResolved.TYPE,
        "probe": PROBE,
        "succeeded": ClaimStatus.SUCCEEDED.value,
        "failed": ClaimStatus.FAILED.value,
        "tz": str(period.tz),
    }


def levels(period: Period) -> Levels:
    """One query: the changes per workflow and bucket, added up here."""
    buckets = period.buckets()
    params = {**_params(period), "edges": buckets}
    by_workflow: dict[str, list[int]] = {}
    changed = False
    # routing.cursor(): the replica when the page reads one (reads_replica).
    with routing.cursor() as cursor:
        cursor.execute(SQL["levels"], params)
        rows = cursor.fetchall()
    for workflow, bucket, delta in rows:
        changed = changed or bucket > 0
        # bucket 0: before the period; i: the i-th bucket (width_bucket, 1-based).
        changes = by_workflow.setdefault(workflow, [0] * (len(buckets) + 1))
        changes[bucket] += delta
    added_up: dict[str, list[int]] = {}
    for workflow, changes in by_workflow.items():
        level, series = changes[0], []
        for change in changes[1:]:
            level += change
            series.append(level)
        if any(series):  # a workflow with nothing unresolved in the period is not drawn
            added_up[workflow] = series
    return Levels(buckets=buckets, hourly=period.hourly, by_workflow=added_up, changed=changed)


@dataclass(frozen=True)
class Decided:
    """The four reports of the claims decided in a period (one statement)."""

    time_to_decide: list[DecideTime]
    deciders: list[Deciders]
    outcomes: list[Outcomes]
    operators: list[OperatorDecisions]


def decided(period: Period) -> Decided:
    """One query: the rows of the four reports, told apart by their first column."""
    found = Decided([], [], [], [])
    with routing.cursor() as cursor:
        cursor.execute(SQL["decisions"], _params(period))
        rows = cursor.fetchall()
    for report_, name, detail, n1, n2, p50, p95 in rows:
        if report_ == "time":
            # To a tenth of a second: what the page, the CSV and the chart's marks say.
            week = date.fromisoformat(detail)
            found.time_to_decide.append(
                DecideTime(name, week, n1, round(float(p50), 1), round(float(p95), 1))
            )
        elif report_ == "deciders":
            found.deciders.append(Deciders(name, n1, n2))
        elif report_ == "outcomes":
            found.outcomes.append(Outcomes(name, detail, n1, n2))
        else:
            found.operators.append(OperatorDecisions(name, n1, n2))
    # The most decisions first, then by name.
    found.operators.sort(key=lambda o: (-o.total, o.operator))
    return found


def report(period: Period) -> Report:
    """The page's two reads: the levels, and the four reports of the decisions."""
    reports = decided(period)
    return Report(
        period=period,
        levels=levels(period),
        time_to_decide=reports.time_to_decide,
        deciders=reports.deciders,
        outcomes=reports.outcomes,
        operators=reports.operators,
    )
