"""The database's clock: leases and deadlines are arithmetic on it, never on a
worker's (docs/architecture.md, "Fences")."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Now

from runs.workflows.definition import StepDef


def db_now_plus(seconds: float) -> ExpressionWrapper[CombinedExpression]:
    """An expression for the database's now() plus `seconds` (negative: ago), to compare
    a column with inside a query; nothing is read until the query runs. Raises nothing."""
    return ExpressionWrapper(
        Now() + Value(timedelta(seconds=seconds)), output_field=DateTimeField()
    )


def lease_for(stepdef: StepDef) -> float:
    """The lease, in seconds, an attempt of this step gets: the step's own
    `lease_seconds`, else settings.RUNS_LEASE_SECONDS. Raises nothing."""
    return stepdef.lease_seconds or float(settings.RUNS_LEASE_SECONDS)
