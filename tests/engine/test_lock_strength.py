"""The run row's lock strength (docs/architecture.md, "Locks"): a transaction that will
take the run FOR UPDATE takes it before anything else it does locks the row more weakly.

A start holds its run FOR KEY SHARE from its statement to its commit and writes its
buffered events (an UPDATE of the run: FOR NO KEY UPDATE) at the end. A transaction that
first wrote to the run (an event, a counter) and then asked for FOR UPDATE waited for
that start while the start's events waited for it: PostgreSQL aborted one of the two
(DeadlockDetected). Each test holds a start of another step of the same run between its
statement and its events (tests/support/races.py, real PostgreSQL sessions, no sleeps),
lets the other transaction run into it, then releases the start: both must commit."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from examples.models import TargetRecord
from runs import engine, events
from runs.engine.attempts.finish import finish_attempt
from runs.engine.attempts.start import Started
from runs.engine.entry.execute import run_attempt, start_attempt
from runs.engine.policies.recover import recover_attempt, settle_late_finish
from runs.models import Attempt, Claim, Event, Run, Step
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from tests.support.factories import enter_effect, expire_leases, run_queued
from tests.support.races import Background

pytestmark = pytest.mark.django_db(transaction=True)


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
    finish_attempt(right, result="right")
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
    run = engine.submit_run(workflow="guarded-then-condition", input={})
    merging = start_attempt(step_id=step_of(run, "merge_checked").id, worker="w1")
    assert merging is not None
    start = HeldStart(monkeypatch, step_of(run, "side_branch").id)
    merge = Background(lambda: run_attempt(merging))  # the effect, then the finish
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
    run = engine.submit_run(workflow="map-then-condition", input={})
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
    finish_attempt(left, result="left")  # would hang here on the start's key share
    start.release()
    right = start.join()
    monkeypatch.undo()
    assert step_of(run, "left").status == StepStatus.SUCCEEDED
    finish_attempt(right, result="right")
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
    finish = Background(lambda: finish_attempt(charge, result=100))
    finish.wait_blocked()  # compensate_late_step's lock_run, on the start's key share
    start.release()
    release = start.join()
    finish.join()
    monkeypatch.undo()

    run.refresh_from_db()
    assert (run.status, run.steps_remaining) == (RunStatus.COMPENSATING, 2)
    assert step_of(run, "refund").status == StepStatus.QUEUED
    finish_attempt(release, result={"released": "seat-1"})
    engine.execute_step(step_id=step_of(run, "refund").id, worker="t")
    run.refresh_from_db()
    assert (run.status, run.steps_remaining) == (RunStatus.CANCELLED, 0)
