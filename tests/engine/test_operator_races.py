"""Operators acting on a run while its engine moves it: real interleavings of two
PostgreSQL sessions (tests/support/races.py), no sleeps. Operator actions and the engine decide
under the run row's lock (docs/architecture.md, "Locks"), so neither undoes the other
silently."""

from __future__ import annotations

import threading

import pytest

from runs import engine
from runs.engine.tools import Started, fail_attempt, recover_attempt, start_attempt
from runs.engine.tools import recover_module as recover_module
from runs.errors import StepNotRetryable
from runs.models import Attempt, Claim, Event, Run, Step
from runs.record import events
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from tests.support.factories import expire_leases, run_queued
from tests.support.races import Background, is_waiting_on_lock
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def _settled(job: Background) -> bool:
    return not job.thread.is_alive() or is_waiting_on_lock(job.pid)


def test_a_branch_failing_during_a_retry_does_not_silently_undo_it(monkeypatch):
    """`left_fails` failed for good and failed the run; `right_flaky` is running. While
    right's failure is being decided (it read the run failed), an operator retries
    left. The retry must not be accepted and then reverted: either it waits and is
    refused (right failed too: retry them together), or right sees the run reopened and
    retries. Never: the retry returns, right fails the reopened run, left is stranded."""
    run = engine.submit_run(workflow="two-failing-branches", input={})
    right = start_attempt(step_id=step_of(run, "right_flaky").id, worker="w")
    assert right is not None
    engine.execute_step(step_id=step_of(run, "left_fails").id, worker="w")
    assert Run.objects.get(pk=run.id).status == RunStatus.FAILED

    deciding, resume = threading.Event(), threading.Event()
    real = Step.has_attempts_left

    def paused(step: Step) -> bool:
        if step.name == "right_flaky":
            deciding.set()
            assert resume.wait(30)
        return real.fget(step)

    monkeypatch.setattr(Step, "has_attempts_left", property(paused))
    failing = Background(lambda: fail_attempt(right, error="boom", uncertain=False))
    assert deciding.wait(30)
    retry = Background(
        lambda: engine.retry_steps(run_id=run.id, step_keys=["left_fails"], actor="ann")
    )
    wait_for(lambda: _settled(retry), timeout=30, what="the retry to finish or wait")
    resume.set()
    outcome = failing.join()
    try:
        retry.join()
        retried = True
    except StepNotRetryable:
        retried = False
    monkeypatch.undo()

    run.refresh_from_db()
    left, right_step = step_of(run, "left_fails"), step_of(run, "right_flaky")
    if retried:
        assert outcome == "retrying"
        assert run.status == RunStatus.RUNNING
        assert (left.status, right_step.status) == (StepStatus.QUEUED, StepStatus.RETRYING)
    else:
        assert outcome == "failed"
        assert run.status == RunStatus.FAILED
        assert (left.status, right_step.status) == (StepStatus.FAILED, StepStatus.FAILED)


def _idempotent_crashing_beside_a_failed_run() -> tuple[Run, Started]:
    """`fails_at_first` failed for good and failed the run while `send_receipt`
    (idempotent, attempts left, its claim in flight) was running; then its worker died:
    its lease has expired, and the sweeper is about to declare the attempt crashed."""
    run = engine.submit_run(workflow="idempotent-beside-failure", input={})
    receipt = start_attempt(step_id=step_of(run, "send_receipt").id, worker="w")
    assert receipt is not None
    engine.execute_step(step_id=step_of(run, "fails_at_first").id, worker="w")
    assert Run.objects.get(pk=run.id).status == RunStatus.FAILED
    assert _receipt_claim(run).status == ClaimStatus.IN_FLIGHT
    expire_leases()
    return run, receipt


def _receipt_claim(run: Run) -> Claim:
    return Claim.objects.get(run=run, step__name="send_receipt")


def test_a_crash_declared_while_a_retry_commits_sees_the_run_reopened(monkeypatch):
    """The sweeper holds `send_receipt`'s attempt and step, about to declare the attempt
    crashed, and has not yet taken the run row (it takes it before its first write)
    when an operator's retry of `fails_at_first` commits. The crash decides on the
    reopened run: `send_receipt` is queued again, its claim stays in flight (not
    abandoned: the run goes on, and its next attempt retakes the same key), and the
    retry stands."""
    run, receipt = _idempotent_crashing_beside_a_failed_run()
    declared, resume = threading.Event(), threading.Event()
    real = recover_module.lock_run

    def paused(run_id, **kwargs):
        declared.set()
        assert resume.wait(30)
        return real(run_id, **kwargs)

    monkeypatch.setattr(recover_module, "lock_run", paused)
    crash = Background(lambda: recover_attempt(attempt_id=receipt.attempt.id))
    assert declared.wait(30)
    retried = engine.retry_steps(run_id=run.id, step_keys=["fails_at_first"], actor="ann")
    assert retried.status == RunStatus.RUNNING
    resume.set()
    assert crash.join() is True
    monkeypatch.undo()

    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    assert (step_of(run, "fails_at_first").status, step_of(run, "send_receipt").status) == (
        StepStatus.QUEUED,
        StepStatus.QUEUED,
    )
    claim = _receipt_claim(run)
    assert claim.status == ClaimStatus.IN_FLIGHT
    assert not Event.objects.filter(run=run, type=events.CLAIM_ABANDONED).exists()
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert list(
        Claim.objects.filter(run=run, step__name="send_receipt").values_list("key", "status")
    ) == [(claim.key, ClaimStatus.SUCCEEDED)]
    assert Attempt.objects.get(pk=receipt.attempt.id).status == AttemptStatus.CRASHED


def test_a_retry_waiting_on_a_crash_deciding_on_the_failed_run_is_refused(monkeypatch):
    """The sweeper holds the run row and decides on the run as failed (no retry
    committed before it): `send_receipt` fails for good and its claim is abandoned (the
    effect may have happened). The retry of `fails_at_first` waits for that decision,
    then is refused (both failed steps must be retried together) instead of being
    accepted and undone; retrying both reuses the abandoned claim's key."""
    run, receipt = _idempotent_crashing_beside_a_failed_run()
    deciding, resume = threading.Event(), threading.Event()
    real = Step.has_attempts_left

    def paused(step: Step) -> bool:
        if step.name == "send_receipt":
            deciding.set()
            assert resume.wait(30)
        return real.fget(step)

    monkeypatch.setattr(Step, "has_attempts_left", property(paused))
    crash = Background(lambda: recover_attempt(attempt_id=receipt.attempt.id))
    assert deciding.wait(30)
    retry = Background(
        lambda: engine.retry_steps(run_id=run.id, step_keys=["fails_at_first"], actor="ann")
    )
    retry.wait_blocked()  # on the run row the crash holds
    resume.set()
    assert crash.join() is True
    with pytest.raises(StepNotRetryable, match="other failed steps \\(send_receipt\\)"):
        retry.join()
    monkeypatch.undo()

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert (step_of(run, "fails_at_first").status, step_of(run, "send_receipt").status) == (
        StepStatus.FAILED,
        StepStatus.FAILED,
    )
    claim = _receipt_claim(run)
    assert claim.status == ClaimStatus.ABANDONED
    assert not Event.objects.filter(run=run, type=events.RUN_REOPENED).exists()

    engine.retry_steps(run_id=run.id, step_keys=["fails_at_first", "send_receipt"], actor="ann")
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert step_of(run, "send_receipt").result == f"receipt sent under {claim.key}"
