"""A pause committing while a step starts: real interleavings of PostgreSQL sessions
(tests/support/races.py), no sleeps. The start statement reads the pauses in its own
snapshot (runs/engine/attempts/start.sql): a start whose statement began before the
pause committed comes first and runs to its end; every start after is refused. Never
both (two attempts), never neither (a step left with no attempt and no way to start).
Two resumes of one workflow at once take turns on its pause rows
(runs/engine/policies/pauses.sql, lock_pauses): the second sends what both held."""

from __future__ import annotations

import pytest
from django.db import transaction

from runs import engine
from runs.engine.tools import run_attempt, start_attempt, start_queued
from runs.models import Attempt, Pause, Run, Step
from runs.states import AttemptStatus, RunStatus, StepStatus
from tests.support.races import Background, is_waiting_on_lock
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def attempts_of(step: Step) -> list[str]:
    return list(
        Attempt.objects.filter(step=step).order_by("number").values_list("status", flat=True)
    )


def test_a_start_in_flight_when_the_pause_commits_came_first_and_finishes():
    run = engine.submit_run(workflow="pure-chain", input={})
    first = step_of(run, "first")
    with transaction.atomic():
        started = start_queued(first.id, "t")  # the start's statement ran; not committed
        assert started is not None
        # The pause takes no lock a start holds: it commits at once.
        pause = Background(
            lambda: engine.pause(workflow="pure-chain", actor="ann", reason="r")
        ).join()

    assert run_attempt(started)[0] == "succeeded"
    assert attempts_of(first) == [AttemptStatus.SUCCEEDED]
    second = step_of(run, "second")
    assert engine.execute_step(step_id=second.id, worker="t") == "skipped"  # after: refused
    assert (step_of(run, "second").status, attempts_of(second)) == (StepStatus.QUEUED, [])
    engine.resume(pause_id=pause.id, actor="ann", reason="r")
    assert engine.execute_step(step_id=second.id, worker="t") == "succeeded"
    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED


def test_a_start_while_the_pause_is_uncommitted_is_not_held_and_comes_first():
    run = engine.submit_run(workflow="pure-chain", input={})
    first = step_of(run, "first")
    with transaction.atomic():
        engine.pause(workflow="pure-chain", actor="ann", reason="r")
        starting = Background(lambda: start_attempt(step_id=first.id, worker="other"))
        started = starting.join()  # not blocked on the uncommitted pause
    assert started is not None
    assert run_attempt(started)[0] == "succeeded"
    assert attempts_of(first) == [AttemptStatus.SUCCEEDED]


@pytest.mark.parametrize("first_start", ["commits", "rolls back"])
def test_a_second_delivery_blocked_behind_the_first_across_a_pause_starts_at_most_once(
    first_start,
):
    """Delivery A started the step (uncommitted); delivery B waits on the step's row;
    the pause commits. A commits: B finds the step running and starts nothing. A rolls
    back: B, whose statement began before the pause, starts it. One attempt either way."""
    run = engine.submit_run(workflow="pure-chain", input={})
    first = step_of(run, "first")
    with transaction.atomic():
        a = start_queued(first.id, "a")
        assert a is not None
        b = Background(lambda: start_attempt(step_id=first.id, worker="b"))
        b.wait_blocked()
        Background(lambda: engine.pause(workflow="pure-chain", actor="ann", reason="r")).join()
        if first_start == "rolls back":
            transaction.set_rollback(True)
    started_b = b.join()

    if first_start == "commits":
        assert started_b is None
        assert run_attempt(a)[0] == "succeeded"
    else:
        assert started_b is not None
        assert run_attempt(started_b)[0] == "succeeded"
    assert attempts_of(first) == [AttemptStatus.SUCCEEDED]
    assert step_of(run, "first").status == StepStatus.SUCCEEDED
    # From here on the pause holds: the successor stays queued.
    assert step_of(run, "second").status == StepStatus.QUEUED
    assert attempts_of(step_of(run, "second")) == []


@pytest.mark.parametrize("first", ["the workflow's", "the step's"])
def test_two_resumes_at_once_of_a_workflow_pause_and_its_step_pause_republish_what_both_held(
    first,
):
    """parallel-pure paused whole, and its step `left` paused too; both pauses resumed at
    once, each in its own session. Each resume alone sees the other pause still standing
    and would leave `left`, which both held; the resumes of one workflow take turns, so
    the second reads the steps after the first's commit and sends `left`. Every step is
    sent by exactly one resume, and nothing is left for the sweeper."""
    whole = engine.pause(workflow="parallel-pure", actor="ann", reason="all of it")
    left_only = engine.pause(workflow="parallel-pure", step="left", actor="ann", reason="left")
    run = engine.submit_run(workflow="parallel-pure", input={})
    left, right = step_of(run, "left"), step_of(run, "right")
    for step in (left, right):  # delivered while paused: turned away
        assert engine.execute_step(step_id=step.id, worker="t") == "skipped"
    mine, theirs = (whole, left_only) if first == "the workflow's" else (left_only, whole)

    with transaction.atomic():
        resumed = engine.resume(pause_id=mine.id, actor="ann", reason="r")
        other = Background(lambda: engine.resume(pause_id=theirs.id, actor="bob", reason="r"))
        # The other resume either waits for this one (its turn comes after this commit)
        # or has read the steps already: let it go as far as it can before committing.
        wait_for(
            lambda: not other.thread.is_alive() or is_waiting_on_lock(other.pid),
            what="the other resume to finish or to wait for this one",
        )
    second = other.join()

    if first == "the workflow's":
        assert (resumed.republished, second.republished) == ([right.id], [left.id])
    else:  # the step's resume, while the workflow's pause stood, sent nothing
        assert (resumed.republished, sorted(second.republished)) == ([], [left.id, right.id])
    assert Pause.objects.count() == 0
    for step in (left, right):
        assert engine.execute_step(step_id=step.id, worker="t") == "succeeded"
    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED
