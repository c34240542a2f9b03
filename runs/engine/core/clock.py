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


# How long one attempt may run when neither the step nor RUNS_STEP_TIMEOUT_SECONDS says
# (docs/authoring.md#timeouts): a transactional step holds a database transaction, its
# locks and the vacuum horizon for as long as it runs, so it gets the least; a guarded
# step past its timeout becomes unresolved and asks a person, so it gets the most (a
# slow call that still works should finish rather than be escalated); pure and
# idempotent steps are retried safely, and a hung one is a bug to bound.
KIND_TIMEOUTS: dict[str, float] = {
    "pure": 300.0,
    "transactional": 60.0,
    "idempotent": 300.0,
    "guarded": 600.0,
}


def timeout_for(stepdef: StepDef) -> float:
    """How long, in seconds, one attempt of this step may run: the step's own `timeout`,
    else settings.RUNS_STEP_TIMEOUT_SECONDS, else its kind's default. Raises nothing."""
    if stepdef.timeout is not None:
        return stepdef.timeout
    setting = getattr(settings, "RUNS_STEP_TIMEOUT_SECONDS", None)
    if setting is not None:
        return float(setting)
    return KIND_TIMEOUTS[str(stepdef.kind)]


def kill_after(timeout: float) -> float:
    """Seconds after an attempt's start at which its worker process is replaced if the
    attempt still runs: its timeout plus RUNS_STEP_TIMEOUT_GRACE_SECONDS (the time the
    stopped call gets to unwind). Its lease never runs past this. Raises nothing."""
    return timeout + float(getattr(settings, "RUNS_STEP_TIMEOUT_GRACE_SECONDS", 10.0))
