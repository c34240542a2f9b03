"""A worker that finishes a step and has exactly one successor to run starts it in the
finish's own transaction (runs/engine/attempts/start.py, start_successor): one commit per step
of a chain. These tests run the engine in-process; the crash of a worker holding such
a start is in tests/integration/test_successors_live.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from runs import engine
from runs.engine.tools import run_attempt, start_attempt, step_claim_key
from runs.models import Attempt, Claim, Event, Run, Step
from runs.record import events, history
from runs.states import ClaimStatus, EffectKind, RunStatus, StepStatus
from runs.workflows import IDEMPOTENT, PURE, Context, Workflow
from tests.support.declared import declared

pytestmark = pytest.mark.django_db(transaction=True)

# A pure step whose successor takes a claim at its start (an idempotent effect).
pure_then_charge = Workflow("pure-then-charge", version=1, input={})


@pure_then_charge.step(kind=PURE)
def quote(ctx: Context) -> int:
    return 700


@pure_then_charge.step(kind=IDEMPOTENT, after=["quote"])
def bill(ctx: Context) -> dict[str, Any]:
    return {"billed": ctx.results["quote"], "key": ctx.idempotency_key}


_workflows = declared(pure_then_charge)


@pytest.fixture
def commits(monkeypatch) -> Iterator[list[int]]:
    """Counts the commits of this process's connection."""
    counted: list[int] = []
    real = connection.commit

    def commit() -> None:
        counted.append(1)
        real()

    monkeypatch.setattr(connection, "commit", commit)
    yield counted


def step(run: Run, name: str) -> Step:
    return Step.objects.get(run=run, name=name)


def written_together(run: Run, first: tuple[str, str], second: tuple[str, str]) -> bool:
    """Whether two events (type, step name) were written by one statement (the buffered
    events of one transaction): in that order, with the same statement timestamp."""
    a, b = (
        Event.objects.get(run=run, type=type, step__name=name) for type, name in (first, second)
    )
    return b.seq > a.seq and a.created_at == b.created_at


def test_a_chain_commits_once_per_step(commits):
    run = engine.submit_run(workflow="pure-chain", input={})
    commits.clear()

    assert engine.execute_step(step_id=step(run, "first").id, worker="t", successors=5) == (
        "succeeded"
    )

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert [(s.name, s.status, s.attempts) for s in run.steps.order_by("id")] == [
        ("first", StepStatus.SUCCEEDED, 1),
        ("second", StepStatus.SUCCEEDED, 1),
    ]
    # first's start; first's finish with second's start; second's finish with the run's.
    assert len(commits) == 3
    assert written_together(run, ("step_succeeded", "first"), ("step_started", "second"))
    assert history.verify_run(run) == []


def test_a_pure_successor_starts_in_its_predecessors_finish_statement():
    """A successor that takes no claim is moved from pending to running by the finish's
    own statement (finish.sql, succeed_and_start): the start statement runs only for the
    step the message brought, the successor's row is written once where it was written
    twice (queued, then started), and its record is the same (history.verify_run)."""
    run = engine.submit_run(workflow="pure-chain", input={})
    sent: list[str] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        engine.execute_step(step_id=step(run, "first").id, worker="t", successors=5)

    starts = [s for s in sent if "INSERT INTO runs_attempt" in s and "fenced" not in s]
    chained = [s for s in sent if "INSERT INTO runs_attempt" in s and "fenced" in s]
    assert (len(starts), len(chained)) == (1, 1)
    second = step(run, "second")
    assert (second.status, second.attempts) == (StepStatus.SUCCEEDED, 1)
    assert second.queued_at == second.started_at  # one statement queued and started it
    assert [e.type for e in Event.objects.filter(run=run, step=second).order_by("seq")] == [
        "step_queued",
        "step_started",
        "step_succeeded",
    ]
    assert history.verify_run(run) == []


def test_a_successor_past_its_runs_deadline_is_queued_not_started_by_the_finish():
    """The finish's statement starts the successor only where the start statement would:
    past the run's deadline it is queued, and the careful path decides after the commit,
    as for any start past the deadline."""
    run = engine.submit_run(workflow="pure-chain", input={})
    first = step(run, "first")
    started = start_attempt(step_id=first.id, worker="t")
    assert started is not None
    Run.objects.filter(pk=run.id).update(deadline_at=timezone.now())

    run_attempt(started, may_continue=True)

    second = step(run, "second")
    assert second.attempts == 0 and Attempt.objects.filter(step=second).count() == 0
    assert second.status == StepStatus.QUEUED
    assert history.verify_run(run) == []


def test_without_direct_successors_each_step_commits_its_start_and_finish(commits):
    run = engine.submit_run(workflow="pure-chain", input={})
    commits.clear()
    engine.execute_step(step_id=step(run, "first").id, worker="t", successors=0)
    engine.execute_step(step_id=step(run, "second").id, worker="t", successors=0)

    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED
    assert len(commits) == 4
    assert not written_together(run, ("step_succeeded", "first"), ("step_started", "second"))


def test_a_successor_that_takes_a_claim_starts_under_a_savepoint():
    run = engine.submit_run(workflow=pure_then_charge.name, input={})

    engine.execute_step(step_id=step(run, "quote").id, worker="t", successors=5)

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    bill = step(run, "bill")
    claim = Claim.objects.get(step=bill)
    assert (claim.status, bill.result) == (
        ClaimStatus.SUCCEEDED,
        {"billed": 700, "key": claim.key},
    )
    assert written_together(run, ("step_succeeded", "quote"), ("step_started", "bill"))
    assert history.verify_run(run) == []


def test_a_successor_its_claim_refuses_leaves_the_finish_whole():
    """The successor's key already has a succeeded claim (written here directly): its
    start rolls back to the savepoint, the finish before it commits, and the careful
    path says why the step does not start."""
    run = engine.submit_run(workflow=pure_then_charge.name, input={})
    bill = step(run, "bill")
    stepdef = pure_then_charge.stepdef("bill")
    key = step_claim_key(run, bill, stepdef)
    Claim.objects.create(
        key=key,
        run=run,
        step=bill,
        kind=EffectKind.IDEMPOTENT,
        status=ClaimStatus.SUCCEEDED,
        completed_at=timezone.now(),
    )

    engine.execute_step(step_id=step(run, "quote").id, worker="t", successors=5)

    quote, bill = step(run, "quote"), step(run, "bill")
    assert (quote.status, quote.result) == (StepStatus.SUCCEEDED, 700)
    assert (bill.status, bill.attempts) == (StepStatus.QUEUED, 0)
    assert f"claim {key} is succeeded" in bill.error
    assert not Attempt.objects.filter(step=bill).exists()
    # The savepoint's events went with it: none says bill started or took its claim.
    assert list(
        Event.objects.filter(run=run, step=bill).order_by("seq").values_list("type", flat=True)
    ) == ["step_queued", "step_refused"]
    assert list(Event.objects.filter(run=run).values_list("seq", flat=True).order_by("seq")) == (
        list(range(1, Event.objects.filter(run=run).count() + 1))
    )


def test_a_finish_that_fails_at_its_end_runs_nothing_it_started(monkeypatch):
    """The finish's last statement (its events) fails after the successor's start was
    written in the same transaction: both roll back, and the worker does not go on to
    run the successor whose start never committed."""
    run = engine.submit_run(workflow="pure-chain", input={})
    real_write = events._write

    def failing_write(pending):
        if {e[1] for e in pending} >= {events.STEP_SUCCEEDED, events.STEP_STARTED}:
            raise OperationalError("injected: the finish's events statement failed")
        real_write(pending)

    monkeypatch.setattr(events, "_write", failing_write)

    outcome = engine.execute_step(step_id=step(run, "first").id, worker="t", successors=5)

    assert outcome == "retrying"
    first, second = step(run, "first"), step(run, "second")
    assert (first.status, first.attempts) == (StepStatus.RETRYING, 1)
    assert (second.status, second.attempts) == (StepStatus.PENDING, 0)
    assert not Attempt.objects.filter(step=second).exists()
