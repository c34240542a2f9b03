"""Incidents: the unresolved claims grouped by what they share (docs/operating.md#incidents).

An outage leaves hundreds of claims that differ only in their run: one workflow, one
step, one error whose text varies by a number or an id. A group is (workflow, step
name, cause), the cause being the claim's error with what varies from claim to claim
taken out (`CAUSE`): so "all 400 matching bar-outage-merge · merge · TimeoutError: code
host timed out" is one line, one filter, and one decision (reconciliation/decisions.py).

The same expression groups and filters (ClaimFilter.claims), in SQL, so the queue, its
groups and a decision over a group always agree on which claims a group holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import (
    Case,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Func,
    Min,
    Q,
    QuerySet,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Left, Now
from django.http import QueryDict

from runs import userinput
from runs.engine import db_now_plus
from runs.models import Claim
from runs.states import ClaimStatus

# The cause of a claim whose attempt's lease ran out (the worker's name left out).
WORKER_DIED = "worker died (lease expired)"
# How much of an error names its cause: its class and the start of its message.
CAUSE_CHARS = 300
_UUID = r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}"


def _replace(expression: Any, pattern: str, replacement: str) -> Func:
    return Func(
        expression,
        Value(pattern),
        Value(replacement),
        Value("g"),
        function="regexp_replace",
        output_field=TextField(),
    )


# A claim's error with what varies between claims of one incident taken out: ids
# become "…", numbers "#", runs of whitespace one space; a dead worker's name goes.
CAUSE = Case(
    When(error__regex=r"^worker .* died \(lease expired\)$", then=Value(WORKER_DIED)),
    default=_replace(
        _replace(_replace(Left("error", CAUSE_CHARS), _UUID, "…"), r"[0-9]+", "#"), r"\s+", " "
    ),
    output_field=TextField(),
)

# The queue's age filter: key -> (label, minimum time unresolved).
AGES = {
    "15m": ("15 min", timedelta(minutes=15)),
    "1h": ("1 hour", timedelta(hours=1)),
    "1d": ("1 day", timedelta(days=1)),
}
# How many groups the overview shows (the queue shows more, and every one by filter).
OVERVIEW_GROUPS = 5
# The filter's parameters, in the order its query string lists them.
FILTER_PARAMS = ("workflow", "step", "cause", "age")


@dataclass(frozen=True)
class ClaimFilter:
    """Which unresolved claims: of a workflow (by name), of a step (by name: a map
    step's items together), of a cause (CAUSE's text), waiting at least an age. Every
    part is optional; an empty filter is the whole queue."""

    workflow: str = ""
    step: str = ""
    cause: str = ""
    age: str = ""

    @classmethod
    def parse(cls, params: QueryDict, errors: dict[str, str]) -> ClaimFilter:
        """The filter in `params`; a bad part is reported in `errors` (by its
        parameter's name, in words) and left out."""
        values = {}
        for name in FILTER_PARAMS:
            try:
                values[name] = userinput.clean_text(params.get(name), f"the {name}")
            except userinput.BadInput as exc:
                errors[name] = str(exc)
                values[name] = ""
        if values["age"] and values["age"] not in AGES:
            errors["age"] = f"unknown age {values['age']!r}: choose one of the list"
            values["age"] = ""
        return cls(**values)

    def __bool__(self) -> bool:
        return any(getattr(self, name) for name in FILTER_PARAMS)

    def query(self, **extra: str) -> str:
        """The filter as a query string (its non-empty parts in a fixed order), with
        `extra` parameters after it."""
        out = QueryDict(mutable=True)
        for name in FILTER_PARAMS:
            if getattr(self, name):
                out[name] = getattr(self, name)
        for name, value in extra.items():
            out[name] = value
        return out.urlencode()

    @property
    def wider(self) -> ClaimFilter:
        """The same filter without its step and cause (every cause of the workflow)."""
        return ClaimFilter(workflow=self.workflow, age=self.age)

    @property
    def parts(self) -> list[tuple[str, str]]:
        """(parameter, value) of its non-empty parts: a form's hidden fields."""
        return [(n, getattr(self, n)) for n in FILTER_PARAMS if getattr(self, n)]

    @property
    def older_than(self) -> timedelta | None:
        return AGES[self.age][1] if self.age in AGES else None

    def claims(self) -> QuerySet[Claim]:
        """The unresolved claims it matches (no order)."""
        claims = Claim.objects.filter(status=ClaimStatus.UNRESOLVED)
        if self.workflow:
            claims = claims.filter(run__workflow=self.workflow)
        if self.step:
            claims = claims.filter(step__name=self.step)
        if self.cause:
            claims = claims.alias(cause=CAUSE).filter(cause=self.cause)
        if self.older_than is not None:
            claims = claims.filter(unresolved_at__lte=db_now_plus(-self.older_than.total_seconds()))
        return claims

    def words(self) -> str:
        """ "bar-outage-merge · merge · TimeoutError: code host timed out, waiting at
        least 1 hour" (what the filter selects, for a heading or a record)."""
        parts = [p for p in (self.workflow, self.step, self.cause) if p]
        said = " · ".join(parts) if parts else "every workflow"
        if self.age in AGES:
            said += f", waiting at least {AGES[self.age][0]}"
        return said


@dataclass(frozen=True)
class IncidentGroup:
    workflow: str
    step: str
    cause: str  # CAUSE's text: what the group's claims failed with
    count: int
    oldest: datetime  # when its longest-waiting claim became unresolved
    age: timedelta  # how long that one has waited, on the database's clock
    with_evidence: int  # claims holding a late answer or an inconclusive probe
    taken: int  # claims an operator is on (a live take)

    @property
    def error_class(self) -> str:
        """The exception's class, unqualified ("TimeoutError"); "" for a dead worker."""
        if self.cause == WORKER_DIED or ": " not in self.cause:
            return ""
        return self.cause.split(": ", 1)[0].rsplit(".", 1)[-1]

    @property
    def message(self) -> str:
        """What the error says, without its class."""
        if not self.error_class:
            return self.cause
        return self.cause.split(": ", 1)[1]

    @property
    def filter(self) -> ClaimFilter:
        return ClaimFilter(workflow=self.workflow, step=self.step, cause=self.cause)


def incident_groups(claims: QuerySet[Claim] | None = None) -> list[IncidentGroup]:
    """The unresolved claims (or those of `claims`) by workflow · step · cause, the
    largest group first (then the longest waiting): one GROUP BY over the queue."""
    if claims is None:
        claims = Claim.objects.filter(status=ClaimStatus.UNRESOLVED)
    rows = (
        claims.annotate(cause=CAUSE)
        .values("run__workflow", "step__name", "cause")
        .annotate(
            n=Count("id"),
            oldest=Min("unresolved_at"),
            evidenced=Count(
                "id", filter=Q(evidence__has_any_keys=["late_result", "late_error", "probe"])
            ),
            taken=Count("id", filter=Q(take__expires_at__gt=Now())),
        )
        .annotate(age=ExpressionWrapper(Now() - F("oldest"), output_field=DurationField()))
        .order_by("-n", "oldest", "run__workflow", "step__name", "cause")
    )
    return [
        IncidentGroup(
            workflow=row["run__workflow"],
            step=row["step__name"],
            cause=row["cause"],
            count=row["n"],
            oldest=row["oldest"],
            age=row["age"],
            with_evidence=row["evidenced"],
            taken=row["taken"],
        )
        for row in rows
    ]


@dataclass(frozen=True)
class Incidents:
    """The overview's and the queue's view of the groups: the first `shown`, and how
    many groups and claims there are in all."""

    groups: list[IncidentGroup]
    total_groups: int
    total_claims: int


def incidents(limit: int, claims: QuerySet[Claim] | None = None) -> Incidents:
    every = incident_groups(claims)
    return Incidents(every[:limit], len(every), sum(g.count for g in every))


__all__ = [
    "AGES",
    "CAUSE",
    "OVERVIEW_GROUPS",
    "WORKER_DIED",
    "ClaimFilter",
    "IncidentGroup",
    "Incidents",
    "incident_groups",
    "incidents",
]
