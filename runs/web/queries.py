"""The read side of the run pages, one function per page, each a fixed number of
queries whatever the size of the data:

- the run page (`run_page`): the events are paginated, the timeline reads its events
  by type, map items are counted by the database, never loaded;
- the runs list (`CappedPaginator`, over runs/reads/filters.py's `parse_filters` and
  `runs_matching`: filters parsed with an error per field, a declared search field's
  value (docs/operating.md#finding-a-run), search by run id or its prefix, submission
  key, claim key or the value of any declared search field);
- the overview (`overview`): counts per status and throughput.

Every query of the list and the overview is served by an index (see runs/models.py),
and no count reads more than COUNT_CAP index entries, so the pages cost about the
same with 100,000 runs as with 10 (bench/ui.py measures them)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from django.core.paginator import EmptyPage, Page, PageNotAnInteger, Paginator
from django.db.models import Count, F, Func, IntegerField, Max, Q, QuerySet
from django.utils import timezone
from django.utils.functional import cached_property

from runs import engine, sql
from runs.errors import RunNotActive, StepNotRetryable
from runs.models import (
    Attempt,
    Claim,
    Event,
    Pause,
    PauseChange,
    Run,
    Signal,
    Step,
)
from runs.pages import contributions
from runs.pages.timefmt import to_the_second
from runs.principals import ENGINE, shown
from runs.reads.filters import (
    COUNT_CAP,
    RunFilters,
    counted_from,
    parse_filters,
    runs_matching,
    search,
    search_filter,
    search_keys_of,
    search_scope,
)
from runs.reads.limits import SlotWait, slot_waits
from runs.sql import routing
from runs.states import RUN_ACTIVE, RUN_FINISHED, AttemptStatus, ClaimStatus, RunStatus, StepStatus
from runs.workflows import registry
from runs.workflows.definition import WaitSpec

from . import timeline

SQL = sql.load(__file__)

__all__ = [
    "COUNT_CAP",
    "RunFilters",
    "counted_from",
    "parse_filters",
    "runs_matching",
    "search",
    "search_filter",
    "search_scope",
]

# --- the run page ----------------------------------------------------------------------
EVENTS_PER_PAGE = 100


class ItemCount(Func):
    """The number of items of a batch, counted by PostgreSQL: the items themselves (a
    JSON list per batch) are never loaded for the page."""

    template = (
        "CASE WHEN jsonb_typeof(%(expressions)s) = 'array' "
        "THEN jsonb_array_length(%(expressions)s) END"
    )
    output_field = IntegerField()


@dataclass
class BatchRow:
    step: Step
    attempts: list[Attempt]
    items: int
    items_done: int

    @property
    def notable(self) -> bool:
        """Worth reading one by one: not a plain success at the first attempt."""
        return (
            self.step.status != "succeeded"
            or len(self.attempts) != 1
            or any(a.status != AttemptStatus.SUCCEEDED for a in self.attempts)
        )


@dataclass
class StepRow:
    step: Step
    attempts: list[Attempt]
    claims: list[Claim]
    batches: list[BatchRow] = field(default_factory=list)
    # A wait or a sleep: what it waits for (stored as a pure step, it is not one).
    wait: WaitSpec | None = None
    # The pause that holds it (or its waiting batches) back, if one.
    paused: Pause | None = None
    # Its concurrency limit is full or its key held (runs/reads/limits.py), if so.
    slot_wait: SlotWait | None = None

    @property
    def kind(self) -> str:
        """What the step is: its effect kind, or wait / sleep."""
        if self.wait is None:
            return str(self.step.kind)
        return "wait" if self.wait.signal else "sleep"

    @property
    def items(self) -> int:
        return sum(b.items for b in self.batches)

    @property
    def items_done(self) -> int:
        return sum(b.items_done for b in self.batches)

    @property
    def notable_batches(self) -> list[BatchRow]:
        return [b for b in self.batches if b.notable]

    @property
    def plain_batches(self) -> int:
        return len(self.batches) - len(self.notable_batches)


@dataclass
class RunPage:
    run: Run
    steps: list[StepRow]
    claims: list[Claim]
    item_counts: dict[str, dict[str, int]]
    events: Page[Event] | None
    # (type, number of events of that type in the run), by type
    event_types: list[tuple[str, int]]
    timeline: timeline.Timeline | None
    now: datetime
    # The signals it received, oldest first, with who sent each (who may: its wait).
    signals: list[Signal] = field(default_factory=list)
    # The pauses of its workflow in effect (docs/operating.md#pause-and-resume).
    pauses: list[Pause] = field(default_factory=list)
    # Its search fields' values, (field, value) by field: each links to the runs
    # with the same value (docs/operating.md#finding-a-run).
    search_keys: list[tuple[str, str]] = field(default_factory=list)

    @property
    def submitter(self) -> str:
        who = shown(self.run.submitted_by, self.run.submitted_via)
        if self.run.on_behalf_of:
            # Whom four eyes also refuses: the people who made or changed the schedule.
            people = ", ".join(shown(p) for p in self.run.on_behalf_of)
            who += f", for {people}"
        return who

    @property
    def deadline(self) -> str:
        """The run's deadline as the page says it, and what became of it: "" when it
        has none (docs/operating.md#deadlines)."""
        at = self.run.deadline_at
        if at is None:
            return ""
        ended = self.run.error.startswith(f"cancelled by {ENGINE}: deadline passed")
        if ended and self.run.status in (RunStatus.CANCELLED, RunStatus.COMPENSATING):
            return f"{to_the_second(at)}: deadline passed, the run was ended at it"
        if at <= self.now:
            return f"{to_the_second(at)}: passed"
        return to_the_second(at)

    @property
    def unresolved(self) -> list[Claim]:
        return [c for c in self.claims if c.status == ClaimStatus.UNRESOLVED]

    @property
    def event_total(self) -> int:
        return sum(n for _, n in self.event_types)

    @property
    def finished(self) -> bool:
        return self.run.status in RUN_FINISHED


class Parts(Enum):
    """Which parts of the run page a request reads."""

    WHOLE = "whole"  # the timeline, the steps, the claims and the event log
    LIVE = "live"  # the same, but the event log only once the run has finished (the
    # live refresh sends it once, when the run ends)
    EVENTS = "events"  # the event log alone (its pages and its filter)


def run_page(
    run_id: uuid.UUID,
    *,
    parts: Parts = Parts.WHOLE,
    events_page: int | str | None = 1,
    event_type: str = "",
    expand: Collection[str] = (),
    collapse: Collection[str] = (),
    now: datetime | None = None,
) -> RunPage:
    """What the run page shows of `parts`.

    Queries: the run, its steps, their attempts, its step claims, its map items counted
    by (batch, attempt, status), its timeline events (by type), its workflow's pauses
    and their audit rows; then the event types with their counts and one page of
    events, its signals, its steps' slot waits (tests/pages/test_query_budgets.py
    counts them), whatever the number of events, batches or items; the event log
    alone, four."""
    now = now or timezone.now()
    run = Run.objects.get(pk=run_id)
    steps = list(
        Step.objects.filter(run=run)
        .defer("items")
        .annotate(item_count=ItemCount(F("items")))
        .order_by("id")
    )
    by_id = {s.pk: s for s in steps}
    if parts is Parts.EVENTS:  # the event log alone: it needs the steps' keys, nothing more
        log, log_types = _event_log(run, by_id, events_page, event_type)
        return RunPage(run, [], [], {}, log, log_types, None, now)
    attempts = list(Attempt.objects.filter(run=run).order_by("step_id", "number"))
    for attempt in attempts:
        attempt.step = by_id[attempt.step_id]
    claims = list(Claim.objects.filter(run=run, item_key__isnull=True).order_by("id"))
    for claim in claims:
        claim.step = by_id[claim.step_id]

    # Map items: counted, never loaded. A batch's items done; per attempt, how many it
    # committed and when the last one did (a crashed attempt's last sign of life).
    items_done: dict[int, int] = defaultdict(int)
    progress: dict[int, timeline.ItemProgress] = {}
    counts: dict[str, dict[str, int]] = {}
    rows = (
        Claim.objects.filter(run=run, item_key__isnull=False)
        .values("step_id", "attempt_id", "status")
        .annotate(n=Count("id"), last=Max("completed_at"))
        .order_by()
    )
    for item_row in rows:
        name = by_id[item_row["step_id"]].name
        per = counts.setdefault(name, {})
        per[item_row["status"]] = per.get(item_row["status"], 0) + item_row["n"]
        if item_row["status"] != ClaimStatus.SUCCEEDED:
            continue
        items_done[item_row["step_id"]] += item_row["n"]
        if item_row["attempt_id"] is not None:
            before = progress.get(item_row["attempt_id"])
            last = item_row["last"]
            if before is not None and before.last_at and (last is None or before.last_at > last):
                last = before.last_at
            progress[item_row["attempt_id"]] = timeline.ItemProgress(
                (before.committed if before else 0) + item_row["n"], last
            )

    tries: dict[int, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        tries[attempt.step_id].append(attempt)
    by_step: dict[int, list[Claim]] = defaultdict(list)
    for claim in claims:
        by_step[claim.step_id].append(claim)
    waits = _waits(run)
    top: dict[int, StepRow] = {}
    for step in steps:
        if step.parent_id is None:
            top[step.pk] = StepRow(
                step, tries[step.pk], by_step[step.pk], wait=waits.get(step.name)
            )
    for step in steps:
        if step.parent_id is not None and step.parent_id in top:
            top[step.parent_id].batches.append(
                BatchRow(step, tries[step.pk], step.item_count or 0, items_done[step.pk])
            )
    for row in top.values():
        row.batches.sort(key=lambda b: (b.step.batch_index or 0, b.step.pk))

    marks = list(Event.objects.filter(run=run, type__in=timeline.MARK_TYPES).order_by("seq"))
    pauses = pauses_of(run.workflow)
    drawn = timeline.build(
        timeline.Source(
            run,
            steps,
            attempts,
            marks,
            items=progress,
            items_done=items_done,
            leases=_leases(run),
            waits=waits,
            pauses=pauses_while(run, now, standing={p.pk for p in pauses}),
        ),
        now=now,
        shown=timeline.Shown(expand=frozenset(expand), collapse=frozenset(collapse)),
    )
    for attempt in attempts:
        # Where the steps table says a crashed attempt's worker was last seen alive.
        attempt.last_seen = drawn.last_seen.get(attempt.pk)  # type: ignore[attr-defined]
    page: Page[Event] | None = None
    types: list[tuple[str, int]] = []
    if parts is Parts.WHOLE or run.status in RUN_FINISHED:
        page, types = _event_log(run, by_id, events_page, event_type)
    signals = list(Signal.objects.filter(run=run).order_by("id"))
    slots_waiting = slot_waits(run, (row.step for row in top.values()))
    for row in top.values():
        row.paused = holding(pauses, row)
        row.slot_wait = slots_waiting.get(row.step.pk)
    return RunPage(
        run,
        list(top.values()),
        claims,
        counts,
        page,
        types,
        drawn,
        now,
        signals,
        pauses,
        search_keys=search_keys_of(run),
    )


WAITING = (StepStatus.QUEUED, StepStatus.RETRYING)


def pauses_of(workflow: str) -> list[Pause]:
    """The workflow's pauses in effect, the whole workflow's first (its unique index)."""
    return list(Pause.objects.filter(workflow=workflow).order_by("step"))


def holding(pauses: list[Pause], row: StepRow) -> Pause | None:
    """The pause that holds this step back: it (or one of its batches) waits to start,
    and a pause of its workflow or of its name stands. As the start statement decides
    (runs/engine/attempts/start.sql)."""
    waiting = row.step.status in WAITING or any(b.step.status in WAITING for b in row.batches)
    if not waiting:
        return None
    return next((p for p in pauses if p.step in ("", row.step.name)), None)


def pauses_while(run: Run, now: datetime, *, standing: set[int]) -> list[timeline.PauseSpan]:
    """The pauses of the run's workflow (whole, or of a step name) that stood while it
    ran, from their audit rows (one query): each pause made before the run ended with
    its resume, if it came after the run began. A pause made before the run and resumed
    before it began has its resume left out, so it passes for standing: those are
    dropped unless it is `standing` (the ids of its Pause rows). Rows written before
    migration 0034 have no pause_id to pair them by, and are left out."""
    end = run.finished_at if run.status in RUN_FINISHED and run.finished_at else now
    rows = list(
        PauseChange.objects.filter(workflow=run.workflow, pause_id__isnull=False)
        .filter(
            Q(action=PauseChange.Action.PAUSE, at__lte=end)
            | Q(action=PauseChange.Action.RESUME, at__gte=run.created_at)
        )
        .order_by("at", "id")
    )
    resumes = {r.pause_id: r for r in rows if r.action == PauseChange.Action.RESUME}
    spans = []
    for row in rows:
        if row.action != PauseChange.Action.PAUSE:
            continue
        resume = resumes.get(row.pause_id)
        if resume is None and row.at < run.created_at and row.pause_id not in standing:
            continue
        spans.append(
            timeline.PauseSpan(
                step=row.step,
                actor=row.actor,
                reason=row.reason,
                since=row.at,
                until=resume.at if resume else None,
                resumed_by=resume.actor if resume else "",
            )
        )
    return spans


def _leases(run: Run) -> dict[str, float]:
    """Each step's lease length, as this process's settings and the workflow say (the
    workers' should be the same; the timeline ignores a length that does not fit)."""
    workflow = registry.get(run.workflow, run.version)
    if workflow is None:
        return {}
    return {name: engine.lease_for(stepdef) for name, stepdef in workflow.steps.items()}


def _waits(run: Run) -> dict[str, WaitSpec]:
    """The workflow's wait and sleep steps, by name."""
    workflow = registry.get(run.workflow, run.version)
    if workflow is None:
        return {}
    return {name: d.wait for name, d in workflow.steps.items() if d.wait is not None}


def _event_log(
    run: Run, steps: Mapping[int, Step], number: int | str | None, event_type: str
) -> tuple[Page[Event], list[tuple[str, int]]]:
    """The run's event types with their counts (one query), and one page of its
    events (one query: the counts say how many there are)."""
    types = list(
        Event.objects.filter(run=run).values_list("type").annotate(n=Count("id")).order_by("type")
    )
    counts = dict(types)
    log = Event.objects.filter(run=run).order_by("seq")
    if event_type:
        # Only a type the run has is asked for: anything else (a typo, a NUL character
        # PostgreSQL cannot compare) is simply no event.
        log = log.filter(type=event_type) if event_type in counts else log.none()
    paginator = Paginator(log, EVENTS_PER_PAGE)
    paginator.count = counts.get(event_type, 0) if event_type else sum(counts.values())
    page = paginator.get_page(number)
    page.object_list = list(page.object_list)
    for event in page.object_list:
        # The step rows are loaded already: no join, no batch items per event.
        event.step = steps.get(event.step_id) if event.step_id else None
    return page, types


def has_live_attempt(data: RunPage) -> bool:
    attempts = [a for row in data.steps for a in row.attempts]
    attempts += [a for row in data.steps for batch in row.batches for a in batch.attempts]
    return any(a.status == AttemptStatus.RUNNING for a in attempts)


@dataclass(frozen=True)
class SignalOffer:
    """A signal the run waits for, as the run page offers it to one person: its button,
    or, where the engine would refuse that person (engine.signal_refusal), why not
    (`why_not`, said in place of the button)."""

    name: str
    why_not: str = ""


def awaited_signals(data: RunPage, user: Any) -> list[SignalOffer]:
    """The signals the run's waiting steps wait for (the signal form offers them), each
    with why `user` may not send it, if the engine would refuse it: an approval is not
    offered to the person it needs someone other than."""
    wf = registry.get(data.run.workflow, data.run.version)
    names: set[str] = set()
    for row in data.steps:
        stepdef = wf.steps.get(row.step.name) if wf else None
        spec = stepdef.wait if stepdef else None
        if row.step.status == StepStatus.WAITING and spec and spec.signal:
            names.add(spec.signal)
    return [SignalOffer(name, _why_not_signal(data.run, name, user)) for name in sorted(names)]


def _why_not_signal(run: Run, name: str, user: Any) -> str:
    """The engine's refusal (if any) said to the person it refuses."""
    refusal = engine.signal_refusal(run, name, user)
    if refusal is None:
        return ""
    if refusal.why == "submitted":
        return f"You submitted this run: another operator approves it (“{name}”)."
    if refusal.why == "on_behalf":
        return (
            f"You made or changed the schedule that submitted this run: another operator "
            f"approves it (“{name}”)."
        )
    return f"“{name}” is sent by {' or '.join(refusal.signalled_by)} only."


def failed_steps(data: RunPage, *, compensations_only: bool = False) -> list[str]:
    """Failed top-level steps, and map steps by name for their failed batches."""
    keys: list[str] = []
    for row in data.steps:
        if compensations_only and not row.step.compensates:
            continue
        if row.step.status == StepStatus.FAILED:
            keys.append(row.step.key)
        elif any(b.step.status == StepStatus.FAILED for b in row.batches):
            keys.append(row.step.name)
    return keys


@dataclass(frozen=True)
class RetryOffer:
    """What the run page offers to retry (`steps`), or, where a step failed and
    nothing can be retried, why not (`why_not`, shown in place of the button)."""

    steps: list[str]
    why_not: str = ""


def retry_offer(data: RunPage) -> RetryOffer:
    """Only what the engine would do (runs/engine/policies/operate.py retry_steps): the failed
    steps of a failed run; in a run that was undone (its compensations ran) only its
    failed compensations; never a run retention has touched. The engine's own preview
    has the last word."""
    run = data.run
    if not failed_steps(data):
        return RetryOffer([])
    if run.status != RunStatus.FAILED:
        if run.status not in RUN_FINISHED:
            return RetryOffer([])  # still going: its steps' retry policies decide
        return RetryOffer(
            [], f"Not retryable: only a failed run's steps are retried; this run is {run.status}."
        )
    if run.retention_started_at is not None:
        return RetryOffer(
            [],
            "Not retryable: retention compacted this run; what a retried step reads "
            "(its inputs, results, map items) may be gone.",
        )
    undone = any(row.step.compensates for row in data.steps)
    keys = failed_steps(data, compensations_only=undone)
    if not keys:
        return RetryOffer(
            [],
            "Not retryable: this run was undone (its compensations ran); a step of its "
            "plan is not run again, only a failed compensation would be.",
        )
    try:
        engine.preview_retry(run_id=run.id, step_keys=keys)
    except (RunNotActive, StepNotRetryable) as exc:
        return RetryOffer([], f"Not retryable: {exc}")
    return RetryOffer(keys)


# --- the runs list ----------------------------------------------------------------------
# The list's filter and search (and the count cap) are the domain's, runs/reads/filters.py:
# the bulk operations (runs/batches/) select runs with the same parser and query.
RUNS_PER_PAGE = 50


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

    def __init__(
        self,
        runs: QuerySet[Run],
        per_page: int,
        cap: int | None = None,
        counted: QuerySet[Any] | None = None,
    ) -> None:
        super().__init__(runs, per_page)
        self.runs = runs
        self.cap = COUNT_CAP if cap is None else cap
        # Rows in one-to-one correspondence with `runs`, cheaper to count (counted_from).
        self.counted = counted

    @cached_property
    def count(self) -> int:
        rows = self.runs if self.counted is None else self.counted
        return rows.order_by().values("pk")[: self.cap + 1].count()

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


# --- the overview ----------------------------------------------------------------------
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
    with routing.cursor() as cursor:
        cursor.execute(
            SQL["counts_by_status"], {"cap": COUNT_CAP + 1, "statuses": list(RunStatus.values)}
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
    with routing.cursor() as cursor:
        cursor.execute(SQL["this_minute"])
        now = cursor.fetchone()[0]
        cursor.execute(
            SQL["succeeded_per_minute"],
            {"succeeded": StepStatus.SUCCEEDED, "since": now - timedelta(minutes=minutes - 1)},
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


def overview() -> dict[str, Any]:
    return {
        "counts": counts_by_status(),
        # What other apps show here (the reconciliation queue's panel), registered by
        # them: these pages never import them (runs/pages/contributions.py).
        **contributions.panels(),
        "failures": recent_failures(),
        "throughput": throughput(),
    }


# --- pauses ----------------------------------------------------------------------------
AUDIT_ROWS = 50


def pauses_in_effect() -> list[Pause]:
    return list(Pause.objects.order_by("workflow", "step", "id"))


def pause_audit(limit: int = AUDIT_ROWS) -> list[PauseChange]:
    """The newest pause and resume changes (by their index on time)."""
    return list(PauseChange.objects.order_by("-at", "-id")[:limit])


def mark_paused(shown: Iterable[Run], pauses_now: list[Pause] | None = None) -> None:
    """Set `paused` (the pause, or None) on each run with a step waiting behind a pause:
    at most two queries (the pauses, unless given, then the waiting steps of the shown
    runs of paused workflows, only if there are any)."""
    runs = list(shown)
    for run in runs:
        run.paused = None  # type: ignore[attr-defined]
    if not runs:
        return
    pauses: dict[str, list[Pause]] = {}
    for pause in pauses_in_effect() if pauses_now is None else pauses_now:
        pauses.setdefault(pause.workflow, []).append(pause)
    held = {run.pk: run for run in runs if run.workflow in pauses and run.status in RUN_ACTIVE}
    if not held:
        return
    waiting = Step.objects.filter(run_id__in=list(held), status__in=WAITING).values_list(
        "run_id", "name"
    )
    for run_id, name in waiting:
        run = held[run_id]
        if run.paused is None:  # type: ignore[attr-defined]
            run.paused = next(  # type: ignore[attr-defined]
                (p for p in pauses[run.workflow] if p.step in ("", name)), None
            )
