"""A run with a deadline, for the deadline tests (tests/integration/test_run_deadlines.py,
tests/engine/test_run_deadlines.py). Real worker processes import it
(tests/support/session_env.py), so it lives here and not in a test module."""

from __future__ import annotations

import time
from typing import Any

from django.db.models.functions import Now

from examples.models import FundsHold
from runs.models import Run
from runs.states import RUN_ACTIVE
from runs.workflows import PURE, TRANSACTIONAL, Context, workflow

# The workflow's own deadline, from submission: long enough for a worker that is up to
# place the hold, short enough for a test to wait for.
DEADLINE = 6.0
# How long `slow` waits, at most, for its run to end at its deadline.
SLOW_BOUND = 60.0

deadline_order = workflow("deadline-order", version=1, deadline=DEADLINE)


@deadline_order.compensation(kind=TRANSACTIONAL)
def release(ctx: Context) -> dict[str, Any]:
    """Undo `hold`: release the hold it placed, once (transactional: with its claim)."""
    n = FundsHold.objects.filter(run_id=ctx.run_id, released_at__isnull=True).update(
        released_at=Now()
    )
    return {"released": n}


@deadline_order.step(kind=TRANSACTIONAL, compensate="release")
def hold(ctx: Context) -> dict[str, Any]:
    """Place a hold on the customer's card (a row of this database)."""
    placed = FundsHold.objects.create(run_id=ctx.run_id, ticket=1, amount=100)
    return {"hold": placed.id}


@deadline_order.step(kind=PURE, lease_seconds=SLOW_BOUND + 30, timeout=SLOW_BOUND + 20)
def slow(ctx: Context) -> dict[str, Any]:
    """Still running at the deadline: it returns once its run is no longer active (the
    sweep ended it), so the deadline passes while it runs, whatever the machine's pace.
    A deadline does not stop a running step; this one finishes and is recorded."""
    bound = time.monotonic() + SLOW_BOUND
    while time.monotonic() < bound:
        status = Run.objects.filter(pk=ctx.run_id).values_list("status", flat=True).get()
        if status not in RUN_ACTIVE:
            return {"run_was": status}
        time.sleep(0.2)
    raise TimeoutError("the run was still active after the bound")


@deadline_order.step(kind=PURE)
def ship(ctx: Context) -> dict[str, Any]:
    """After the deadline: never starts."""
    return {"shipped": True}
