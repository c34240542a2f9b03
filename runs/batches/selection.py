"""Which runs a batch selects, and what it would do to them (the preview).

The selection is the runs list's: the same parser (`parse_filters`) and the same query
(`runs_matching`, runs/reads/filters.py), so `/runs/?<filter>` and the batch made from
it select the same runs. A preview reads, never writes; the engine still decides each
run when the batch reaches it (a run that changed meanwhile is refused then, with its
reason)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.db.models import Count, Q, QuerySet
from django.http import QueryDict

from runs import engine
from runs.errors import EngineError, InvalidBatch
from runs.models import Run
from runs.reads.filters import COUNT_CAP, RunFilters, parse_filters, runs_matching
from runs.states import RUN_ACTIVE, RUN_OPERATIONS, BatchOperation, RunStatus

# The filter's parameters, in the order the normalized query string lists them: every
# parameter parse_filters reads, so the recorded filter selects what the batch selected
# (a search field's `field` and `value` included), and a bad one refuses the batch.
FILTER_PARAMS = ("q", "field", "value", "status", "workflow", "created_after", "created_before")
# A batch selects at most this many runs (the runs list counts up to it too): above
# it the preview says "more than …" and confirming is refused; narrow the filter.
MAX_RUNS = COUNT_CAP
# How many runs the preview shows one by one (with each retry's keys).
SAMPLE = 10

OPERATIONS = {
    BatchOperation.CANCEL: "Cancel matching active runs",
    BatchOperation.RETRY: "Retry the failed steps of matching failed runs",
}


def check_operation(operation: str) -> str:
    if operation not in RUN_OPERATIONS:
        raise InvalidBatch(
            f"unknown operation {operation!r}: it is cancel or retry", field="operation"
        )
    return operation


def parse(params: QueryDict) -> RunFilters:
    """The runs list's filter, as the list parses it; a bad value refuses the whole
    selection, naming its parameter (the first one, in FILTER_PARAMS order)."""
    filters = parse_filters(params)
    for name in FILTER_PARAMS:
        if name in filters.errors:
            raise InvalidBatch(f"{name}: {filters.errors[name]}", field=name)
    return filters


def normalized(params: QueryDict | Mapping[str, str]) -> str:
    """The filter as a query string: only the filter's parameters, non-empty, trimmed,
    in a fixed order. Parsed again by `parse`, it selects the same runs."""
    out = QueryDict(mutable=True)
    for name in FILTER_PARAMS:
        value = (params.get(name) or "").strip()
        if value:
            out[name] = value
    return out.urlencode()


def selection(filters: RunFilters) -> QuerySet[Run]:
    """The runs the filter matches, in no particular order (the batch's own order is
    its items' ids)."""
    return runs_matching(filters).order_by()


@dataclass(frozen=True)
class Refusal:
    why: str
    count: int


@dataclass(frozen=True)
class Sample:
    """One run of the preview: what the operation would do to it, or why not."""

    run_id: uuid.UUID
    workflow: str
    status: str
    plan: engine.RetryPlan | None = None  # a retry's steps, keys, and effects kept
    refused: str = ""


@dataclass
class Preview:
    operation: str
    filter: str
    matched: int  # exact up to MAX_RUNS, then MAX_RUNS + 1
    applies: int
    refusals: list[Refusal] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)

    @property
    def capped(self) -> bool:
        return self.matched > MAX_RUNS

    @property
    def matched_label(self) -> str:
        return f"more than {MAX_RUNS:,}" if self.capped else f"{self.matched:,}"

    @property
    def refused(self) -> int:
        return sum(r.count for r in self.refusals)

    @property
    def rest(self) -> int:
        """Runs it applies to beyond the sample."""
        return max(0, self.applies - len(self.samples))

    @property
    def confirmable(self) -> bool:
        return 0 < self.matched <= MAX_RUNS


def preview(operation: str, params: QueryDict) -> Preview:
    """What a batch of `operation` over the filter in `params` would do, by the runs'
    statuses now: how many match (counted up to MAX_RUNS + 1), how many it applies to,
    how many it would refuse and why, and the first SAMPLE runs it applies to with the
    engine's own preview (a retry's steps and the key each will use). Writes nothing."""
    check_operation(operation)
    filters = parse(params)
    capped_ids = selection(filters).values("pk")[: MAX_RUNS + 1]
    rows = (
        Run.objects.filter(pk__in=capped_ids)
        .values("status")
        .annotate(
            n=Count("id"), compacted=Count("id", filter=Q(retention_started_at__isnull=False))
        )
        .order_by("status")
    )
    by_status = {row["status"]: (row["n"], row["compacted"]) for row in rows}
    matched = sum(n for n, _ in by_status.values())
    result = Preview(operation, normalized(params), matched, 0)
    if operation == BatchOperation.CANCEL:
        for status, (n, _) in by_status.items():
            if status in RUN_ACTIVE:
                result.applies += n
            else:
                result.refusals.append(Refusal(_not_active(status), n))
        eligible = selection(filters).filter(status__in=RUN_ACTIVE)
    else:
        for status, (n, compacted) in by_status.items():
            if status != RunStatus.FAILED:
                result.refusals.append(Refusal(_not_failed(status), n))
                continue
            result.applies += n - compacted
            if compacted:
                why = "compacted by retention: what a retried step reads may be gone"
                result.refusals.append(Refusal(why, compacted))
        eligible = selection(filters).filter(
            status=RunStatus.FAILED, retention_started_at__isnull=True
        )
    runs = list(eligible.order_by("-created_at", "-id").only("id", "workflow", "status")[:SAMPLE])
    result.samples = [_sample(operation, run) for run in runs]
    return result


def _sample(operation: str, run: Run) -> Sample:
    if operation == BatchOperation.CANCEL:
        return Sample(run.id, run.workflow, run.status)
    try:
        plan = engine.preview_retry_run(run_id=run.id)
    except EngineError as exc:
        return Sample(run.id, run.workflow, run.status, refused=str(exc))
    return Sample(run.id, run.workflow, run.status, plan=plan)


def _not_active(status: str) -> str:
    if status == RunStatus.COMPENSATING:
        return "being compensated: it is ending already"
    return f"already {status}: only an active run is cancelled"


def _not_failed(status: str) -> str:
    if status in RUN_ACTIVE:
        return f"still {status.replace('_', ' ')}: only a failed run's steps are retried"
    return f"{status.replace('_', ' ')}: only a failed run's steps are retried"
