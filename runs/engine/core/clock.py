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
    return ExpressionWrapper(
        Now() + Value(timedelta(seconds=seconds)), output_field=DateTimeField()
    )


def lease_for(stepdef: StepDef) -> float:
    return stepdef.lease_seconds or float(settings.RUNS_LEASE_SECONDS)
