"""The run row's lock strength (docs/architecture.md, "Locks"): a transaction that will
take the run FOR UPDATE takes it before anything else it does locks the row more weakly.

A start holds its run FOR KEY SHARE from its statement to its commit and writes its
buffered events (an UPDATE of the run: FOR NO KEY UPDATE) at the end. A transaction that
first wrote to the run (an event, a counter) and then asked for FOR UPDATE waited for
that start while the start's events waited for it: PostgreSQL aborted one of the two
(DeadlockDetected). Each test holds a start of another step of the same run between its
statement and its events (tests/support/races.py, real PostgreSQL sessions, no sleeps),
lets the other transaction run into it, then releases the start: both must commit.

The last tests pin a map item's commit against the sweeper's crash of its batch: the
item's deferred foreign-key checks take the batch's attempt before its run, so either
the crash skips the attempt or the item waits for the crash and is fenced; no deadlock,
and no item committed under a crashed attempt."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction

from examples.fakes import CodeHost
from examples.models import TargetRecord
from runs import engine
from runs.engine.tools import (
    Started,
    finish_with_result,
    recover_attempt,
    run_attempt,
    settle_late_finish,
    start_attempt,
)
from runs.models import Attempt, Claim, Event, Run, Step
from runs.record import events
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from runs.workflows import GUARDED, PURE, TRANSACTIONAL, Context, Workflow
from tests.support import workflows as test_workflows
from tests.support.declared import declared
from tests.support.factories import enter_effect, expire_leases, run_queued
from tests.support.races import Background, is_waiting_on_lock
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


# --- a guarded step and a map, each followed by a step whose condition raises, beside a
# branch that a test starts while they finish --------------------------------------------
def condition_raises(ctx: Context) -> bool:
    raise RuntimeError("the approvals service did not answer")


guarded_then_condition = Workflow("guarded-then-condition", version=1)


@guarded_then_condition.step(kind=PURE, after=[])
def side_branch(ctx: Context) -> str:
    return "side"


@guarded_then_condition.step(kind=GUARDED, after=[])
def merge_checked(ctx: Context) -> dict[str, Any]:
    return CodeHost().merge(change_id=1, run_id=ctx.run_id)


@guarded_then_condition.step(kind=PURE, after=["merge_checked"], when=condition_raises)
def announce_merge(ctx: Context) -> str:
    return "announced"


map_then_condition = Workflow("map-then-condition", version=1)


@map_then_condition.step(kind=PURE, after=[])
def side_of_map(ctx: Context) -> str:
    return "side"


@map_then_condition.step(kind=PURE, after=[])
def list_targets(ctx: Context) -> list[int]:
    return [1, 2]


@map_then_condition.map_step(over="list_targets", batch_size=10, kind=TRANSACTIONAL)
def copy_target(ctx: Context, target: int) -> None:
    TargetRecord.objects.create(record_id=target, run_id=ctx.run_id)


@map_then_condition.step(kind=PURE, after=["copy_target"], when=condition_raises)
def report_targets(ctx: Context) -> str:
    return "reported"


_workflows = declared(guarded_then_condition, map_then_condition)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def event_types(run: Run, step: Step) -> list[str]:
    return list(
        Event.objects.filter(run=run, step=step).order_by("seq").values_list("type", flat=True)
    )


class HeldStart:
    """A delivery's start of `step_id` in a session of its own, held after its statement
    (the run FOR KEY SHARE, until its commit) and before its buffered events are written
    (the run's UPDATE): where a worker's start spends the time its Python takes between
    the two. `release()` lets it write them and commit; `join()` returns its Started."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, step_id: int, worker: str = "w2") -> None:
        self.reached, self._go = threading.Event(), threading.Event()
        mine = threading.local()
        real = events._write

        def held(pending: Any) -> None:
            if getattr(mine, "hold", False):
                mine.hold = False
                self.reached.set()
                assert self._go.wait(30)
            real(pending)

        monkeypatch.setattr(events, "_write", held)

        def start() -> Started | None:
            mine.hold = True
            return start_attempt(step_id=step_id, worker=worker)

        self.job = Background(start)
        assert self.reached.wait(30), "the start never reached its events"

    def release(self) -> None:
        self._go.set()

    def join(self) -> Started:
        started = self.job.join()
        assert started is not None
        return started


def _settled(job: Background) -> bool:
    return not job.thread.is_alive() or is_waiting_on_lock(job.pid)


# --- the sweeper's crash ----------------------------------------------------------------
def test_a_crash_declared_while_another_step_starts_waits_for_the_start_and_both_commit(
    monkeypatch,
):
    """`left` was running when its worker died; the sweeper declares its attempt crashed
    while a delivery starts `right` of the same run. The crash takes the run FOR UPDATE
    before its first event, so it waits for the start (which holds the run FOR KEY SHARE
    and has its events still to write) instead of deadlocking with it: `left` is queued
    again, `right` runs, the run goes on to succeed."""
    run = engine.submit_run(workflow="parallel-pure", input={})
    left = start_attempt(step_id=step_of(run, "left").id, worker="dead")
    assert left is not None
    expire_leases()

    start = HeldStart(monkeypatch, step_of(run, "right").id)
    crash = Background(lambda: recover_attempt(attempt_id=left.attempt.id))
    crash.wait_blocked()  # on the run row: the start's key share
    start.release()
    right = start.join()
    assert crash.join() is True
    monkeypatch.undo()

    assert Attempt.objects.get(pk=left.attempt.id).status == AttemptStatus.CRASHED
    assert Attempt.objects.get(pk=right.attempt.id).status == AttemptStatus.RUNNING
    assert (step_of(run, "left").status, step_of(run, "right").status) == (
        StepStatus.QUEUED,
        StepStatus.RUNNING,
    )
    assert event_types(run, step_of(run, "left")) == [
        events.STEP_QUEUED,
        events.STEP_STARTED,
        events.ATTEMPT_CRASHED,
        events.STEP_QUEUED,
    ]
    assert event_types(run, step_of(run, "right"))[-1] == events.STEP_STARTED
    finish_with_result(right, "right")
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED


# --- a late guarded result --------------------------------------------------------------
def test_a_late_guarded_result_settled_while_another_step_starts_keeps_its_evidence(
    monkeypatch,
):
    """`deploy_now` (guarded) entered its effect, its lease expired, and its worker comes
    back with the result that proves the deploy happened, while a delivery starts
    `explode` of the same run. Settling the late finish (crash the attempt, the claim
    unresolved, the result kept as evidence) takes the run FOR UPDATE before its first
    write, waits for the start, and commits: the evidence is on the unresolved claim for
    the person who decides."""
    run = engine.submit_run(workflow="doomed-beside-guarded", input={})
    deploy = start_attempt(step_id=step_of(run, "deploy_now").id, worker="paused")
    assert deploy is not None
    enter_effect(deploy)
    expire_leases()

    start = HeldStart(monkeypatch, step_of(run, "explode").id)
    late = Background(lambda: settle_late_finish(deploy, {"late_result": {"deployed": "v2"}}))
    late.wait_blocked()  # on the run row: the start's key share
    start.release()
    explode = start.join()
    late.join()
    monkeypatch.undo()

    claim = Claim.objects.get(run=run, step__name="deploy_now")
    assert claim.status == ClaimStatus.UNRESOLVED
    assert claim.evidence == {"late_result": {"deployed": "v2"}, "late_attempt": 1}
    evidence = Event.objects.get(run=run, type=events.CLAIM_EVIDENCE)
    assert evidence.payload["evidence"] == claim.evidence
    assert Attempt.objects.get(pk=deploy.attempt.id).status == AttemptStatus.CRASHED
    assert step_of(run, "deploy_now").status == StepStatus.UNRESOLVED
    assert Attempt.objects.get(pk=explode.attempt.id).status == AttemptStatus.RUNNING
    assert step_of(run, "explode").status == StepStatus.RUNNING
    assert Run.objects.get(pk=run.id).status == RunStatus.NEEDS_RECONCILIATION


# --- a finish that may fail the run after its statement -----------------------------------
def test_a_guarded_finish_whose_dependents_condition_raises_waits_for_a_start_and_succeeds(
    monkeypatch,
):
    """`merge_checked` (guarded) merged; its finish makes `announce_merge` ready, whose
    condition raises, which fails that step and the run (fail_run: the run FOR UPDATE).
    Meanwhile a delivery starts `side_branch`. The finish takes the run FOR UPDATE
    before its statement (after its attempt), waits for the start, and records the
    merge: the step succeeded, not left unresolved by a deadlock that rolled its finish
    back (the merge happened)."""
    run = engine.submit_run(workflow=guarded_then_condition.name, input={})
    merging = start_attempt(step_id=step_of(run, "merge_checked").id, worker="w1")
    assert merging is not None
    start = HeldStart(monkeypatch, step_of(run, "side_branch").id)
    merge = Background(lambda: run_attempt(merging)[0])  # the effect, then the finish
    merge.wait_blocked()  # the finish, on the run row: the start's key share
    start.release()
    side = start.join()
    outcome = merge.join()
    monkeypatch.undo()

    merged = step_of(run, "merge_checked")
    assert (outcome, merged.status) == ("succeeded", StepStatus.SUCCEEDED), (
        Attempt.objects.filter(step=merged).values_list("status", "error").first()
    )
    assert Claim.objects.get(step=merged).status == ClaimStatus.SUCCEEDED
    assert step_of(run, "announce_merge").status == StepStatus.FAILED
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("step announce_merge failed: its condition raised")
    assert Attempt.objects.get(pk=side.attempt.id).status == AttemptStatus.RUNNING


def test_a_maps_last_batch_whose_dependents_condition_raises_waits_for_a_start_and_succeeds(
    monkeypatch,
):
    """The same through a map: the last batch of `copy_target` succeeds, the map step
    succeeds, and `report_targets`'s condition raises (fail_run). The batch's finish
    takes the run FOR UPDATE first, waits for the start of `side_of_map`, and commits."""
    run = engine.submit_run(workflow=map_then_condition.name, input={})
    engine.execute_step(step_id=step_of(run, "list_targets").id, worker="t")
    batch = step_of(run, "copy_target[0]")
    start = HeldStart(monkeypatch, step_of(run, "side_of_map").id)
    copy = Background(lambda: engine.execute_step(step_id=batch.id, worker="w1"))
    copy.wait_blocked()  # the batch's finish, on the run row: the start's key share
    start.release()
    side = start.join()
    outcome = copy.join()
    monkeypatch.undo()

    batch.refresh_from_db()
    assert (outcome, batch.status) == ("succeeded", StepStatus.SUCCEEDED), (
        Attempt.objects.filter(step=batch).values_list("status", "error").first()
    )
    assert step_of(run, "copy_target").status == StepStatus.SUCCEEDED
    assert TargetRecord.objects.filter(run_id=run.id).count() == 2
    assert step_of(run, "report_targets").status == StepStatus.FAILED
    assert Run.objects.get(pk=run.id).status == RunStatus.FAILED
    assert Attempt.objects.get(pk=side.attempt.id).status == AttemptStatus.RUNNING


def test_a_plain_finish_takes_no_strong_lock_and_does_not_wait_for_starts(monkeypatch):
    """The hot path is left as it was: a pure step whose dependents are plain finishes
    (its counter's FOR NO KEY UPDATE) beside a start in flight without waiting for it;
    the start's events then wait for the finish's commit."""
    run = engine.submit_run(workflow="parallel-pure", input={})
    left = start_attempt(step_id=step_of(run, "left").id, worker="w1")
    assert left is not None
    start = HeldStart(monkeypatch, step_of(run, "right").id)
    finish_with_result(left, "left")  # would hang here on the start's key share
    start.release()
    right = start.join()
    monkeypatch.undo()
    assert step_of(run, "left").status == StepStatus.SUCCEEDED
    finish_with_result(right, "right")
    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED


def test_a_late_finish_planning_its_compensation_while_a_compensation_starts_commits(
    monkeypatch,
):
    """compensate_late_step takes the run FOR UPDATE after the finish's statement, but
    only where the run no longer goes on, and there no start holds the run with events
    still to write, except a compensation's while the run compensates, and then the
    finish's statement left the run untouched (its counter skips a compensating run).
    So `charge`, finishing after a cancel began compensating, waits for the start of
    `release` and then plans `refund`: no deadlock (nor before the lock-strength fix)."""
    run = engine.submit_run(workflow="compensated-order", input={"outcome": "ok"})
    engine.execute_step(step_id=step_of(run, "reserve").id, worker="t")
    charge = start_attempt(step_id=step_of(run, "charge").id, worker="t")
    assert charge is not None
    engine.cancel_run(run_id=run.id, actor="ann")
    start = HeldStart(monkeypatch, step_of(run, "release").id)
    finish = Background(lambda: finish_with_result(charge, 100))
    finish.wait_blocked()  # compensate_late_step's lock_run, on the start's key share
    start.release()
    release = start.join()
    finish.join()
    monkeypatch.undo()

    run.refresh_from_db()
    assert (run.status, run.steps_remaining) == (RunStatus.COMPENSATING, 2)
    assert step_of(run, "refund").status == StepStatus.QUEUED
    finish_with_result(release, {"released": "seat-1"})
    engine.execute_step(step_id=step_of(run, "refund").id, worker="t")
    run.refresh_from_db()
    assert (run.status, run.steps_remaining) == (RunStatus.CANCELLED, 0)


# --- a map item committing while the sweeper crashes its batch ------------------------------
@pytest.fixture
def paused_item():
    """A heartbeat-map run whose one item wrote, heartbeat and paused inside its
    transaction (tests/support/workflows.py, PAUSES), its lease then expired: the
    sweeper may crash the batch, and the item may commit, in either order."""
    run = engine.submit_run(workflow="heartbeat-map", input={})
    engine.execute_step(step_id=step_of(run, "one_item").id, worker="t")
    batch = step_of(run, "write_item_then_pause[0]")
    paused, release = threading.Event(), threading.Event()
    test_workflows.PAUSES[str(run.id)] = (paused, release)
    item = Background(lambda: engine.execute_step(step_id=batch.id, worker="w1"))
    assert paused.wait(30)
    expire_leases()
    attempt = Attempt.objects.get(step=batch)
    yield run, batch, attempt, item, release
    release.set()
    test_workflows.PAUSES.pop(str(run.id), None)


def _item_rolled_back(run: Run, batch: Step, attempt: Attempt) -> None:
    assert Attempt.objects.get(pk=attempt.id).status == AttemptStatus.CRASHED
    assert not Claim.objects.filter(step=batch).exists()
    assert not TargetRecord.objects.filter(run_id=run.id).exists()
    assert step_of(run, batch.key).status == StepStatus.QUEUED


def test_an_item_committing_while_the_sweeper_crashes_its_batch_waits_and_is_fenced(
    monkeypatch, paused_item
):
    """The sweeper holds the batch's attempt (and its step and run) while the item
    commits: the item's commit waits for it (its first deferred check takes the
    attempt), then its fence finds the attempt crashed and the item rolls back. The
    crash is not disturbed; the batch is queued again."""
    run, batch, attempt, item, release = paused_item
    declared, resume = threading.Event(), threading.Event()
    real = events.append_event

    def paused(run_id: Any, event: events.Event, **kwargs: Any) -> None:
        if isinstance(event, events.AttemptCrashed):
            declared.set()
            assert resume.wait(30)
        real(run_id, event, **kwargs)

    monkeypatch.setattr(events, "append_event", paused)
    crash = Background(lambda: recover_attempt(attempt_id=attempt.id))
    assert declared.wait(30)
    release.set()
    item.wait_blocked()  # its commit, on the attempt the crash holds
    resume.set()
    assert crash.join() is True
    assert item.join() == "fenced"
    monkeypatch.undo()
    _item_rolled_back(run, batch, attempt)


def test_the_sweeper_skips_a_batch_whose_item_is_committing_and_the_item_is_fenced_by_its_lease(
    paused_item,
):
    """The item's commit is under way (another session holds the batch's step row, so
    it stops at its check of that row, after its check of the attempt): the sweeper
    finds the attempt locked and skips it, without waiting. The item's fence then finds
    the lease expired and rolls it back, and its worker crashes the attempt itself."""
    run, batch, attempt, item, release = paused_item
    holding, let_go = threading.Event(), threading.Event()

    def hold_the_step() -> None:
        with transaction.atomic():
            Step.objects.select_for_update().filter(pk=batch.id).first()
            holding.set()
            assert let_go.wait(30)

    holder = Background(hold_the_step)
    assert holding.wait(30)
    release.set()
    item.wait_blocked()  # its commit, on the batch's step row
    crash = Background(lambda: recover_attempt(attempt_id=attempt.id))
    wait_for(lambda: _settled(crash), timeout=30, what="the sweeper to skip or wait")
    assert not crash.thread.is_alive(), "the sweeper waited for a committing item"
    assert crash.join() is False
    let_go.set()
    holder.join()
    assert item.join() == "fenced"
    _item_rolled_back(run, batch, attempt)


def test_an_item_claims_deferred_checks_take_its_attempt_before_its_run_and_step():
    """What the two tests above rely on: PostgreSQL fires an item claim's deferred
    triggers at its commit in name order, and the foreign-key check of the attempt
    comes before those of the run and the step (the fence, last, locks the attempt
    again). Were the run's first, an item's commit could hold the run FOR KEY SHARE and
    wait for the attempt that a crash holds while the crash waits for the run."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT coalesce(c.confrelid::regclass::text, t.tgname)
            FROM pg_trigger t LEFT JOIN pg_constraint c ON c.oid = t.tgconstraint
                                                     AND c.contype = 'f'
            WHERE t.tgrelid = 'runs_claim'::regclass AND t.tgdeferrable
              AND (t.tgtype & 4) <> 0  -- fires on INSERT
            ORDER BY t.tgname COLLATE "C"
            """
        )
        order = [row[0] for row in cursor.fetchall()]
    assert order == ["runs_attempt", "runs_run", "runs_step", "runs_claim_item_fence"]
