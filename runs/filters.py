"""The runs list's filter (docs/operating.md#the-operator-pages): its parameters parsed
with an error per field, the search by run id (or its prefix), submission key or claim
key, and the query of the runs it matches. One parser and one query for every place
that selects runs by a filter: the runs list (runs/web/queries.py) and the bulk
operations (runs/batches/), so a page and a batch made from it select the same runs."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.http import QueryDict

from runs.inputs import BadInput, clean_text, parse_moment
from runs.models import Claim, Run, SubmissionKey
from runs.states import RunStatus

HEX = re.compile(r"[0-9a-f]{4,32}")

# Counts stop here: past it a page says "more than 10,000". Counting all 100,000 runs
# (or every succeeded one) is a scan of 100,000 index entries, repeated on every page
# of the list, for a figure nobody needs to the unit; up to the cap it is exact.
COUNT_CAP = 10_000


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
