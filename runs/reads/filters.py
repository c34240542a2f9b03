"""The runs list's filter (docs/operating.md#the-operator-pages): its parameters parsed
with an error per field, the search by run id (or its prefix), submission key, claim
key or a declared search field's value, and the query of the runs it matches. One
parser and one query for every place that selects runs by a filter: the runs list
(runs/web/queries.py) and the bulk operations (runs/batches/), so a page and a batch
made from it select the same runs."""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Case, F, IntegerField, QuerySet, Value, When
from django.http import QueryDict

from runs.models import Claim, Run, RunSearchKey, SubmissionKey
from runs.reads.summaries import search_keys_matching, with_search_key
from runs.states import RunStatus
from runs.userinput import BadInput, clean_text, parse_moment
from runs.workflows import registry
from runs.workflows.search import SEARCH_VALUE_MAX

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
    # A declared search field and the value to find (docs/operating.md#finding-a-run);
    # the filter applies when both are given.
    search_field: str = ""
    search_value: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    # What the search found, best first: run id -> what matched (the page says it).
    matched: dict[uuid.UUID, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return bool(
            self.status
            or self.workflow
            or self.created_after
            or self.created_before
            or self.q
            or (self.search_field and self.search_value)
        )


def parse_filters(params: QueryDict) -> RunFilters:
    """The list's filters, each checked on its own: a bad one is reported beside its
    field (runs/userinput.py) and left out of the query."""
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
    search_field, value = search_filter(
        text("field", "the search field"), text("value", "the value")
    )
    if isinstance(search_field, BadInput):
        errors["field"] = str(search_field)
        search_field = value = ""
    return RunFilters(
        status=status,
        workflow=text("workflow", "the workflow"),
        created_after=moment("created_after", "created from", end=False),
        created_before=moment("created_before", "created until", end=True),
        q=text("q", "the search"),
        search_field=search_field,
        search_value=value,
        errors=errors,
    )


def search_filter(name: str, value: str) -> tuple[str | BadInput, str]:
    """A search field filter (field, value), or why not (a BadInput for the field): the
    field must be declared by some workflow; a field without a value filters nothing
    (the form sends the field first), a value without a field is refused. The API
    (api/views.py) applies the same rules."""
    declared = registry.search_fields()
    if name and name not in declared:
        known = ", ".join(declared) or "none is declared"
        return BadInput(f"unknown search field {name!r} (the search fields: {known})"), ""
    if value and not name:
        return BadInput("choose the search field this value is of"), ""
    return name, value


# How many runs one search term may find per way of matching (a short id prefix, a
# key many runs share): the list shows them, best matches first.
SEARCH_CAP = 200


def search(q: str) -> dict[uuid.UUID, str]:
    """What the search box finds, best match first: the run whose id it is, runs whose
    id starts with it (8 hex digits are enough in practice), the run of a claim key, runs
    submitted with it as their idempotency key (by anyone), runs whose declared search
    field has it as its value (docs/operating.md#finding-a-run). Each with what matched,
    so a key chosen to look like a run id cannot pass for the run it imitates."""
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
    # The claim keys, the submission keys and the declared search fields' values, in
    # one query (each by its own index; the fields by one index search per field).
    nothing = {"found_by": Value(0), "matched_field": Value(""), "matched_workflow": Value("")}
    columns = ("run_id", "found_by", "matched_field", "matched_workflow")
    keys = (
        Claim.objects.filter(key=q)
        .annotate(**{**nothing, "found_by": Value(1)})
        .values_list(*columns)[:SEARCH_CAP]
        .union(
            SubmissionKey.objects.filter(key=q)
            .annotate(**{**nothing, "found_by": Value(2)})
            .values_list(*columns)[:SEARCH_CAP],
            all=True,
        )
    )
    declared = registry.search_fields()
    if declared and len(q) <= SEARCH_VALUE_MAX:
        keys = keys.union(
            RunSearchKey.objects.filter(field__in=list(declared), value=q)
            .order_by("-created_at", "-run_id")
            .annotate(found_by=Value(3), matched_field=F("field"), matched_workflow=F("workflow"))
            .values_list(*columns)[:SEARCH_CAP],
            all=True,
        )
    by_field: dict[uuid.UUID, list[str]] = defaultdict(list)
    for run_id, kind, name, workflow in sorted(keys, key=lambda row: (row[1], row[2])):
        if kind == 3:
            by_field[run_id].append(f"{name} = {q} ({workflow})")
            found.setdefault(run_id, "")
        else:
            found.setdefault(
                run_id, "matched a claim key" if kind == 1 else "matched its submission key"
            )
    for run_id, texts in by_field.items():
        # Found by id or key already, it says so; else what matched, e.g.
        # "matched change_id = 301 (merge-change)".
        found[run_id] = found[run_id] or "matched " + ", ".join(texts)
    return found


def search_scope(q: str, workflow: str = "") -> str:
    """What search(q) looked at, as the runs list says it beside the search box, so that
    a search that finds nothing is not taken for "no such run": a workflow that declares
    no search fields is never found by a field's value (docs/operating.md#finding-a-run).
    With `workflow` (the list's filter), that workflow's fields; without, every declared
    field and the workflows that declare it. "" when nothing is searched, or `q` is a
    whole run id (then only that run is looked up)."""
    if not q:
        return ""
    try:
        uuid.UUID(q)
        return ""
    except ValueError:
        pass
    shown = f"“{q}”" if len(q) <= 40 else f"“{q[:40]}…”"
    looked = f"{shown} was looked for in run ids, claim keys and submission keys"
    declared = registry.search_fields()
    if len(q) > SEARCH_VALUE_MAX:
        return f"{looked} only: no search field holds a value longer than {SEARCH_VALUE_MAX}."
    if workflow:
        fields = [name for name, by in declared.items() if workflow in by]
        if not fields:
            return f"{workflow} declares no search fields, so {looked} only."
        return f"{looked}, and in {workflow}'s search fields: {', '.join(fields)}."
    if not declared:
        return f"{looked} only: no workflow declares search fields."
    each = "; ".join(f"{name} ({', '.join(by)})" for name, by in declared.items())
    return f"{looked}, and in the search fields {each}. Other workflows declare none."


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
    if filters.search_field and filters.search_value:
        runs = with_search_key(runs, filters.search_field, filters.search_value)
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


def counted_from(filters: RunFilters) -> QuerySet[Any] | None:
    """What the list's capped count may read instead of the runs joined to their search
    keys: the keys alone, when every filter in effect is one a key holds (the field and
    value, the workflow, the created time, copied from the run). Exact, since a run has
    at most one key per field; and an index-only range of runsearchkey_value_idx, where
    the join reads up to 10,001 runs by primary key (docs/performance.md#search-fields)."""
    if not (filters.search_field and filters.search_value) or filters.status or filters.q:
        return None
    return search_keys_matching(
        filters.search_field,
        filters.search_value,
        workflow=filters.workflow,
        created_after=filters.created_after,
        created_before=filters.created_before,
    )


def search_keys_of(run: Run) -> list[tuple[str, str]]:
    """The run's search keys as the list's filter finds them, (field, value) by field:
    each links to the runs with the same value (the run page, a claim in the queue).
    RunSearchKey rows go with the run's payloads under retention, so there is never a
    link to a list without it. Read only when the workflow declares search fields: the
    other runs make no query for it."""
    workflow = registry.get(run.workflow, run.version)
    if workflow is None or not workflow.search:
        return []
    return list(
        RunSearchKey.objects.filter(run=run).order_by("field").values_list("field", "value")
    )
