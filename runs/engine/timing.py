"""Lease arithmetic on the database's clock (DESIGN.md §7: one clock)."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Now


def db_now_plus(seconds: float) -> ExpressionWrapper[CombinedExpression]:
    return ExpressionWrapper(
        Now() + Value(timedelta(seconds=seconds)), output_field=DateTimeField()
    )
