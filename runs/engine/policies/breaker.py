"""A step's breaker: the engine pauses a step name itself after too many failed or
unknown outcomes in a window (docs/operating.md#breakers, docs/authoring.md#breakers).

What counts: attempts of the step name, in every run and version of its workflow (a map
step's batches included), that ended `failed` (an error, a timeout that stopped the call,
a postcondition), `crashed` (the lease expired: a dead worker, or a timeout whose call
did not stop) or `unresolved` (a guarded effect of unknown outcome), with `finished_at`
within the window and after the step's last resume. A deferred attempt (its claim key
was busy) is not an outcome; neither is a map item's own failure, only its batch's.

When: after the transaction that ended the attempt committed (`transaction.on_commit`),
in statements of its own, never inside it:
- counted inside, two attempts ending at once would each miss the other's uncommitted
  row and neither would trip; counted after each commit, the later of any two counts
  sees both commits, so the Nth outcome always trips it (a worker killed between its
  commit and its count misses that one check; the next outcome checks again);
- the outcome's transaction holds the attempt and its run row (docs/architecture.md#locks),
  and a pause takes no run row: after the commit the trip holds nothing of the run.
The pause itself is policies/pauses.pause_by_breaker: its unique (workflow, step) makes
two trips at once one pause, and a pause already standing is left as it is.

Cost: a step that declares no breaker costs nothing (the StepDef says so, in memory;
no statement); one that declares one costs, per failed or unknown outcome only, one
read of its override (BreakerSetting) and one count by index. Success costs nothing.
"""

from __future__ import annotations

import logging

from django.db import connection, transaction

from runs import sql
from runs.models import BreakerSetting, Pause, PauseChange
from runs.states import AttemptStatus
from runs.workflows import Breaker, StepDef

from .pauses import pause_by_breaker

log = logging.getLogger(__name__)

SQL = sql.load(__file__)

# The endings that count: failed (timed out included), crashed, unresolved.
ENDED = [AttemptStatus.FAILED, AttemptStatus.CRASHED, AttemptStatus.UNRESOLVED]


def after_outcome(workflow: str, stepdef: StepDef | None) -> None:
    """Called in the transaction that ended an attempt failed, crashed or unresolved:
    if the step declares a breaker, check it once that transaction commits (see the
    module's docstring for why after). A step without one: nothing, no statement."""
    if stepdef is None or stepdef.breaker is None:
        return
    step, declared = stepdef.name, stepdef.breaker
    transaction.on_commit(lambda: check(workflow=workflow, step=step, declared=declared))


def check(*, workflow: str, step: str, declared: Breaker) -> Pause | None:
    """Count the step's failed or unknown outcomes in its window; at its threshold or
    above, pause the step (the engine's pause, once). Returns the pause it made, or None
    (under the threshold, switched off, or a pause already stood)."""
    override = BreakerSetting.objects.filter(workflow=workflow, step=step).first()
    breaker = declared.now(override)
    if not breaker.enabled:
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            SQL["count_outcomes"],
            {
                "ended": ENDED,
                "within": breaker.within_seconds,
                "workflow": workflow,
                "step": step,
                "resume": PauseChange.Action.RESUME.value,
            },
        )
        (count,) = cursor.fetchone()
    if count < breaker.outcomes:
        return None
    reason = (
        f"breaker: {count} failed or unknown outcomes of {step} in the last "
        f"{breaker.within_seconds:g} s (threshold {breaker.outcomes})"
    )
    return pause_by_breaker(
        workflow=workflow,
        step=step,
        reason=reason,
        counts={
            "outcomes": count,
            "threshold": breaker.outcomes,
            "within_seconds": breaker.within_seconds,
            "overridden": breaker.overridden,
        },
    )
