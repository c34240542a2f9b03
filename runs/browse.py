"""Read side of the runs list and the overview: filters parsed with an error per field,
search by run id (or its prefix), submission key or claim key, and the overview's
counts and throughput. Every query here is served by an index (see runs/models.py),
and no count reads more than COUNT_CAP index entries, so the pages cost about the
same with 100,000 runs as with 10 (bench/ui.py measures them)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.paginator import EmptyPage, Page, PageNotAnInteger, Paginator
from django.db import connection
from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.http import QueryDict
from django.utils.functional import cached_property

from .inputs import BadInput, clean_text, parse_moment
from .models import Claim, Run, SubmissionKey
from .states import ClaimStatus, RunStatus
from .workflows import registry

HEX = re.compile(r"[0-9a-f]{4,32}")

# Counts stop here: past it a page says "more than 10,000". Counting all 100,000 runs
# (or every succeeded one) is a scan of 100,000 index entries, repeated on every page
# of the list, for a figure nobody needs to the unit; up to the cap it is exact.
COUNT_CAP = 10_000
RUNS_PER_PAGE = 50


@dataclass
class RunFilters:
    status: str = ""
    workflow: str = ""
    created_after: datetime | None = None
    created_before: datetime | None = None
    q: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    # What the search found, best first: run id -> what matched (the page says it).
    matched: dict[uuid.UUID, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return bool(
            self.status or self.workflow or self.created_after or self.created_before or self.q
        )


def parse_filters(params: QueryDict) -> RunFilters:
    """The list's filters, each checked on its own: a bad one is reported beside its
    field (runs/inputs.py) and left out of the query."""
    errors: dict[str, str] = {}

    def text(name: str, what: str) -> str:
        try:
            return clean_text(params.get(name, ""), what)
        except BadInput as exc:
            errors[name] = str(exc)
            return ""

    def moment(name: str, what: str, *, end: bool) -> datetime | None:
        try:
            return parse_moment(params.get(name, ""), what, end=end)
        except BadInput as exc:
            errors[name] = str(exc)
            return None

    status = text("status", "the status")
    if status and status not in RunStatus.values:
        errors["status"] = f"unknown status {status!r}"
        status = ""
    return RunFilters(
        status=status,
        workflow=text("workflow", "the workflow"),
        created_after=moment("created_after", "created from", end=False),
        created_before=moment("created_before", "created until", end=True),
        q=text("q", "the search"),
        errors=errors,
    )


# How many runs one search term may find per way of matching (a short id prefix, a
# key many runs share): the list shows them, best matches first.
SEARCH_CAP = 200


def search(q: str) -> dict[uuid.UUID, str]:
    """What the search box finds, best match first: the run whose id it is, runs whose
    id starts with it (8 hex digits are enough in practice), the run of a claim key, runs
    submitted with it as their idempotency key (by anyone). Each with what matched, so
    a key chosen to look like a run id cannot pass for the run it imitates."""
    found: dict[uuid.UUID, str] = {}
    try:
        # A whole run id names one run: nothing else is looked up (no claim key is a bare
        # id, and a submission key that copies one does not pass for that run).
        found[uuid.UUID(q)] = "matched the run id"
        return found
    except ValueError:
        pass
    digits = q.lower().replace("-", "")
    if HEX.fullmatch(digits):
        # A prefix of the id is a range of ids: the primary key's index serves it.
        low = uuid.UUID(digits.ljust(32, "0"))
        high = uuid.UUID(digits.ljust(32, "f"))
        for run_id in Run.objects.filter(pk__gte=low, pk__lte=high).values_list("id", flat=True)[
            :SEARCH_CAP
        ]:
            found.setdefault(run_id, "matched the run id (its start)")
    # The claim keys and the submission keys, in one query (each by its key's index).
    keys = (
        Claim.objects.filter(key=q)
        .annotate(found_by=Value(1))
        .values_list("run_id", "found_by")[:SEARCH_CAP]
        .union(
            SubmissionKey.objects.filter(key=q)
            .annotate(found_by=Value(2))
            .values_list("run_id", "found_by")[:SEARCH_CAP],
            all=True,
        )
    )
    for run_id, kind in sorted(keys, key=lambda row: row[1]):
        found.setdefault(
            run_id, "matched a claim key" if kind == 1 else "matched its submission key"
        )
    return found


def runs_matching(filters: RunFilters) -> QuerySet[Run]:
    runs = Run.objects.defer("input", "result").order_by("-created_at", "-id")
    if filters.status:
        runs = runs.filter(status=filters.status)
    if filters.workflow:
        runs = runs.filter(workflow=filters.workflow)
    if filters.created_after:
        runs = runs.filter(created_at__gte=filters.created_after)
    if filters.created_before:
        runs = runs.filter(created_at__lt=filters.created_before)
    if filters.q:
        filters.matched = search(filters.q)
        rank = Case(
            *(When(pk=run_id, then=n) for n, run_id in enumerate(filters.matched)),
            output_field=IntegerField(),
        )
        runs = runs.filter(pk__in=list(filters.matched)).order_by(
            rank if filters.matched else "-created_at", "-created_at", "-id"
        )
    return runs


class CappedPage(Page):  # type: ignore[type-arg]
    """A page of a CappedPaginator past its cap: whether a next page exists is known
    from the one row read beyond this page, not from a total."""

    def __init__(
        self, object_list: list[Run], number: int, paginator: CappedPaginator, more: bool
    ) -> None:
        super().__init__(object_list, number, paginator)
        self.more = more

    def has_next(self) -> bool:
        return self.more


class CappedPaginator(Paginator):  # type: ignore[type-arg]
    """Django's Paginator with a count that stops at `cap` (one query, `SELECT count(*)
    FROM (… LIMIT cap + 1)`, served by the index of the list's order). Up to the cap,
    everything is as usual. Past it, `capped` is true, the page count is unknown,
    and any page that has rows can be reached: each page reads one row more than it
    shows to know whether another follows. Two queries per page, as before."""

    def __init__(self, runs: QuerySet[Run], per_page: int, cap: int | None = None) -> None:
        super().__init__(runs, per_page)
        self.runs = runs
        self.cap = COUNT_CAP if cap is None else cap

    @cached_property
    def count(self) -> int:
        return self.runs.order_by().values("pk")[: self.cap + 1].count()

    @property
    def capped(self) -> bool:
        return self.count > self.cap

    @property
    def count_label(self) -> str:
        """The count as the list says it: 1,234, or more than 10,000."""
        return f"more than {self.cap:,}" if self.capped else f"{self.count:,}"

    def validate_number(self, number: Any) -> int:
        if not self.capped:
            return int(super().validate_number(number))
        try:
            if isinstance(number, float) and not number.is_integer():
                raise ValueError
            n = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger("That page number is not an integer") from None
        if n < 1:
            raise EmptyPage("That page number is less than 1")
        return n

    def get_page(self, number: Any) -> Page[Run]:
        """As Django's: page 1 for a page that is not a number; for one past the end,
        the last page the count vouches for (past the cap, found by asking for the
        page first: one query more, for a link nobody was given)."""
        try:
            return super().get_page(number)
        except EmptyPage:
            return self.page(self.num_pages)

    def page(self, number: Any) -> Page[Run]:
        number = self.validate_number(number)
        if not self.capped:
            return super().page(number)
        bottom = (number - 1) * self.per_page
        rows = list(self.runs[bottom : bottom + self.per_page + 1])
        if not rows:
            raise EmptyPage("That page contains no results")
        return CappedPage(rows[: self.per_page], number, self, more=len(rows) > self.per_page)


def workflow_names() -> list[str]:
    return sorted({w.name for w in registry.all_workflows()})


# --- the overview ------------------------------------------------------------------------
@dataclass(frozen=True)
class Minute:
    start: datetime
    steps: int
    x: float
    height: float


@dataclass(frozen=True)
class Throughput:
    minutes: list[Minute]
    total: int
    peak: int
    width: int
    height: int
    ticks: list[tuple[int, str]]


CHART_BAR, CHART_GAP, CHART_HEIGHT = 9, 2, 72


@dataclass(frozen=True)
class StatusCount:
    status: str
    count: int  # exact up to COUNT_CAP, then COUNT_CAP + 1

    @property
    def capped(self) -> bool:
        return self.count > COUNT_CAP

    @property
    def label(self) -> str:
        return f"{COUNT_CAP:,}+" if self.capped else f"{self.count:,}"

    @property
    def title(self) -> str:
        return f"more than {COUNT_CAP:,} runs (counting stops there)" if self.capped else ""


def counts_by_status() -> list[StatusCount]:
    """Runs per status, each counted up to COUNT_CAP + 1 from run_status_newest_idx
    (at most that many index entries per status, in one query), not a GROUP BY over
    every run: the finished statuses only grow, the active ones stay small and exact."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT s.status, (
                SELECT count(*) FROM (
                    SELECT 1 FROM runs_run r WHERE r.status = s.status LIMIT %s
                ) AS capped
            )
            FROM unnest(%s::text[]) AS s(status)
            """,
            [COUNT_CAP + 1, list(RunStatus.values)],
        )
        counts = dict(cursor.fetchall())
    return [StatusCount(status, counts.get(status, 0)) for status in RunStatus.values]


def recent_failures(limit: int = 10) -> list[Run]:
    return list(
        Run.objects.filter(status=RunStatus.FAILED)
        .defer("input", "result")
        .order_by("-created_at")[:limit]
    )


def throughput(minutes: int = 60) -> Throughput:
    """Steps completed per minute over the last `minutes` (the database's clock), from
    the partial index on succeeded steps' finished_at."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT date_trunc('minute', now())")
        now = cursor.fetchone()[0]
        cursor.execute(
            """
            SELECT date_trunc('minute', finished_at), count(*)
            FROM runs_step
            WHERE status = 'succeeded' AND finished_at >= %s
            GROUP BY 1
            """,
            [now - timedelta(minutes=minutes - 1)],
        )
        rows = cursor.fetchall()
    per_minute = {minute: n for minute, n in rows}
    starts = [now - timedelta(minutes=minutes - 1 - i) for i in range(minutes)]
    peak = max(per_minute.values(), default=0)
    bars = []
    for i, start in enumerate(starts):
        n = per_minute.get(start, 0)
        height = round(CHART_HEIGHT * n / peak, 1) if peak else 0.0
        bars.append(Minute(start, n, i * (CHART_BAR + CHART_GAP), max(height, 1.0 if n else 0)))
    return Throughput(
        minutes=bars,
        total=sum(per_minute.values()),
        peak=peak,
        width=minutes * (CHART_BAR + CHART_GAP),
        height=CHART_HEIGHT,
        ticks=[
            (
                (minutes - ago) * (CHART_BAR + CHART_GAP),
                f"\u2212{ago} min",
            )  # a minus sign, as on the axis
            for ago in range(15, minutes, 15)
        ],
    )


@dataclass(frozen=True)
class QueueSummary:
    size: int
    oldest_age: timedelta | None
    stale: int  # how many are older than RECONCILIATION_STALE_MINUTES


def queue_summary() -> QueueSummary:
    """The reconciliation queue at a glance (the overview; reconciliation.queries
    re-exports it): size, oldest age and stale count, in one indexed query
    (claim_unresolved_idx). Here, not in reconciliation/, because the runs package
    never imports the operator side."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), now() - min(unresolved_at), "
            "count(*) FILTER (WHERE unresolved_at < now() - make_interval(secs => %s)) "
            "FROM runs_claim WHERE status = %s",
            [float(settings.RECONCILIATION_STALE_MINUTES) * 60, ClaimStatus.UNRESOLVED],
        )
        size, oldest, stale = cursor.fetchone()
    return QueueSummary(int(size), oldest, int(stale))


def overview() -> dict[str, Any]:
    return {
        "counts": counts_by_status(),
        "queue": queue_summary(),
        "failures": recent_failures(),
        "throughput": throughput(),
    }
