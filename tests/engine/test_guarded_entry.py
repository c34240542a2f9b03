"""A guarded attempt whose worker died before it called the step's function did not
perform the effect, and the engine knows it: the pre-effect lease check records that
the effect was entered (Attempt.effect_entered_at), and recovery retries an attempt
that never got that far instead of asking a person."""

from __future__ import annotations

from typing import Any

import pytest

from examples.fakes import CodeHost
from examples.models import Merge
from runs import engine
from runs.engine.tools import finish_with_result, start_attempt
from runs.models import Attempt, Claim, Run, Step
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from runs.workflows import GUARDED, PURE, Context, Workflow
from tests.support.declared import declared
from tests.support.factories import expire_leases, run_queued

pytestmark = pytest.mark.django_db(transaction=True)


# A pure step whose guarded successor starts in its finish's transaction.
quote_then_merge = Workflow("quote-then-merge", version=1, input={"change_id": int})


@quote_then_merge.step(kind=PURE)
def quote_change(ctx: Context) -> int:
    return int(ctx.input["change_id"])


@quote_then_merge.step(kind=GUARDED)
def merge_quoted(ctx: Context) -> dict[str, Any]:
    return CodeHost().merge(change_id=ctx.results["quote_change"], run_id=ctx.run_id)


_workflows = declared(quote_then_merge)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def test_a_guarded_successor_started_in_its_predecessors_finish_is_retried_if_never_entered():
    """The successor's start (claim included) commits with `quote_change`'s finish; the
    worker dies before calling `merge_quoted`. Nothing was merged: retry, same claim."""
    run = engine.submit_run(workflow=quote_then_merge.name, input={"change_id": 41})
    started = start_attempt(step_id=step_of(run, "quote_change").id, worker="w")
    assert started is not None
    successor = finish_with_result(started, 41, may_continue=True)
    assert successor is not None and successor.started is not None  # in the finish's transaction
    merge = step_of(run, "merge_quoted")
    assert merge.status == StepStatus.RUNNING
    # ... and the worker dies here.
    expire_leases()

    assert len(engine.sweep().crashed) == 1

    merge.refresh_from_db()
    assert merge.status == StepStatus.QUEUED
    claim = Claim.objects.get(run=run)
    assert claim.status == ClaimStatus.IN_FLIGHT
    crashed = Attempt.objects.get(step=merge, number=1)
    assert (crashed.status, crashed.effect_entered_at) == (AttemptStatus.CRASHED, None)
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert Merge.objects.filter(run_id=run.id).count() == 1
    assert Claim.objects.get(run=run).key == claim.key  # the same logical invocation


def test_a_guarded_attempt_that_entered_its_effect_and_died_is_unresolved():
    run = engine.submit_run(workflow="merge-change", input={"change_id": 42})
    step = step_of(run, "merge")
    started = start_attempt(step_id=step.id, worker="w")
    assert started is not None
    from runs.engine.tools import still_owned_before_effect

    assert still_owned_before_effect(started)  # entered: the effect may be under way
    expire_leases()

    engine.sweep()

    step.refresh_from_db()
    assert step.status == StepStatus.UNRESOLVED
    assert Claim.objects.get(run=run).status == ClaimStatus.UNRESOLVED
    assert Attempt.objects.get(step=step).effect_entered_at is not None
