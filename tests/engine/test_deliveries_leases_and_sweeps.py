"""Duplicate and late deliveries, lost leases and lost sessions, crossing sweeps, early
retries, what "failed" means and a live run's history check: each case reproduced by a
real interleaving or a real fault."""

from __future__ import annotations

import io
import json
import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from celery.signals import before_task_publish
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from examples.fakes import PaymentAPI
from examples.models import Merge, PaymentCharge, TargetRecord
from reconciliation.services import resolve_claim
from runs import engine
from runs.engine.tools import execute_module as execute_module
from runs.engine.tools import (
    fail_attempt,
    finish_with_result,
    keys,
    publish,
    start_attempt,
    step_queue_depth,
)
from runs.engine.tools import recover_module as recover_module
from runs.models import Attempt, Claim, Event, Run, Step
from runs.record import events, history
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from runs.workflows import GUARDED, Context, FencingToken, NotApplied, Retry, Workflow
from tests.support import factories
from tests.support import workflows as test_workflows
from tests.support.declared import declared
from tests.support.factories import earlier, enter_effect, expire_leases, run_queued
from tests.support.races import Background


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


# --- a duplicate delivery must not reopen a finished step -------------------------
@pytest.mark.django_db(transaction=True)
def test_start_attempt_duplicate_blocked_behind_start_and_finish_does_nothing():
    run = engine.submit_run(workflow="pure-chain", input={})
    first = step_of(run, "first")
    with transaction.atomic():
        # The winning delivery starts AND finishes the step; its row lock is held
        # until commit, so the losing delivery's UPDATE takes its snapshot before
        # either and blocks on the row.
        won = start_attempt(step_id=first.id, worker="winner")
        assert won is not None
        finish_with_result(won, "first")
        loser = Background(lambda: start_attempt(step_id=first.id, worker="loser"))
        loser.wait_blocked()
    assert loser.join() is None

    first.refresh_from_db()
    assert (first.status, first.attempts, first.current_attempt_id) == (
        StepStatus.SUCCEEDED,
        1,
        None,
    )
    assert list(Attempt.objects.filter(step=first).values_list("worker", flat=True)) == ["winner"]
    second = step_of(run, "second")
    assert (second.status, second.pending_deps) == (StepStatus.QUEUED, 0)
    assert Run.objects.get(pk=run.id).status == RunStatus.RUNNING
    assert test_workflows.CALLS.get(str(run.id), 0) == 0  # nobody ran its function


# --- helpers ---------------------------------------------------------------------------
@pytest.fixture
def published():
    """Every Celery message this process publishes: (task name, args, eta)."""
    sent: list[tuple[str, tuple, datetime | None]] = []

    def record(sender=None, headers=None, body=None, **_):
        eta = headers.get("eta")
        sent.append((sender, tuple(body[0]), datetime.fromisoformat(eta) if eta else None))

    before_task_publish.connect(record, weak=False)
    try:
        yield sent
    finally:
        before_task_publish.disconnect(record)


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


# --- a late guarded result is kept, even when it beats the sweeper ------------------
@pytest.mark.parametrize("mode", ["return", "raise"])
def test_late_guarded_finish_before_sweep_crashes_its_attempt_and_keeps_evidence(db, mode):
    run = engine.submit_run(workflow="hooked-merge", input={"mode": mode})
    test_workflows.HOOKS[str(run.id)] = expire_leases  # paused past its lease, no sweep yet

    assert engine.execute_step(step_id=step_of(run, "hooked_merge").id, worker="w") == "fenced"

    merge = Merge.objects.get(run_id=run.id)
    claim = Claim.objects.get(run=run)
    assert claim.status == ClaimStatus.UNRESOLVED
    if mode == "return":
        assert claim.evidence == {
            "late_result": {"merge_id": merge.id, "change_id": 1},
            "late_attempt": 1,
        }
    else:
        assert claim.evidence == {
            "late_error": "TimeoutError: code host did not answer",
            "late_attempt": 1,
        }
    assert Attempt.objects.get(run=run).status == AttemptStatus.CRASHED
    run.refresh_from_db()
    assert (run.status, step_of(run, "hooked_merge").status) == (
        RunStatus.NEEDS_RECONCILIATION,
        StepStatus.UNRESOLVED,
    )
    assert Event.objects.filter(run=run, type=events.CLAIM_EVIDENCE).count() == 1
    assert engine.sweep().crashed == []  # nothing left for the sweeper


def test_late_guarded_result_after_resolution_is_an_event_and_changes_nothing(db):
    run = factories.late_result_after_resolution()

    first = Claim.objects.filter(run=run).order_by("id").first()
    assert (first.status, first.resolved_by, first.evidence) == (ClaimStatus.FAILED, "ann", None)
    late = Event.objects.get(run=run, type=events.LATE_RESULT_AFTER_RESOLUTION)
    merge = Merge.objects.get(run_id=run.id)
    assert late.payload == {
        "key": first.key,
        "resolved_as": "failed",
        "resolved_by": "ann",
        "evidence": {"late_result": {"merge_id": merge.id, "change_id": 1}, "late_attempt": 1},
    }


# --- a guarded effect is never called by an attempt that lost its lease -------------
def _pause_after_start(monkeypatch, *, then) -> None:
    """The worker pauses between its start commit and the call into the external
    system; `then` is what happens to the world meanwhile."""
    real = execute_module.start_attempt

    def paused(**kwargs):
        started = real(**kwargs)
        if started is not None:
            then()
        return started

    monkeypatch.setattr(execute_module, "start_attempt", paused)


def test_guarded_attempt_paused_past_its_lease_does_not_call_the_effect(db, monkeypatch):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 4})
    _pause_after_start(monkeypatch, then=expire_leases)

    assert engine.execute_step(step_id=step_of(run, "merge").id, worker="w") == "fenced"

    assert Merge.objects.filter(run_id=run.id).count() == 0
    attempt = Attempt.objects.get(run=run)
    assert (attempt.status, attempt.error) == (
        AttemptStatus.CRASHED,
        "lease expired before the effect was called",
    )
    # It knows it did nothing: a plain retry, with the same in-flight claim.
    assert step_of(run, "merge").status == StepStatus.QUEUED
    assert Claim.objects.get(run=run).status == ClaimStatus.IN_FLIGHT
    monkeypatch.undo()
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert Merge.objects.filter(run_id=run.id).count() == 1


def test_guarded_attempt_declared_crashed_before_its_call_is_retried_and_never_calls(
    db, monkeypatch
):
    """The sweeper crashed the attempt before it reached its effect: its row says it
    never entered (effect_entered_at), so the step is retried under the same claim, not
    sent to a person; the paused worker's own lease check then fails and it does not
    call the effect."""
    run = engine.submit_run(workflow="merge-change", input={"change_id": 4})

    def swept_meanwhile() -> None:
        expire_leases()
        assert len(engine.sweep().crashed) == 1

    _pause_after_start(monkeypatch, then=swept_meanwhile)

    assert engine.execute_step(step_id=step_of(run, "merge").id, worker="w") == "fenced"

    assert Merge.objects.filter(run_id=run.id).count() == 0
    claim = Claim.objects.get(run=run)
    assert (claim.status, claim.evidence) == (ClaimStatus.IN_FLIGHT, None)
    assert step_of(run, "merge").status == StepStatus.QUEUED
    attempt = Attempt.objects.get(run=run)
    assert (attempt.status, attempt.error, attempt.effect_entered_at) == (
        AttemptStatus.CRASHED,
        "lease expired before the effect was called",
        None,
    )
    monkeypatch.undo()
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert Merge.objects.filter(run_id=run.id).count() == 1
    assert Claim.objects.get(run=run).key == claim.key


def test_probe_of_crashed_guarded_attempt_waits_for_lease_plus_grace(
    db, settings, published, django_capture_on_commit_callbacks
):
    settings.RUNS_PROBE_GRACE_SECONDS = 30
    run = engine.submit_run(workflow="merge-change-probed", input={"change_id": 5})
    enter_effect(start_attempt(step_id=step_of(run, "merge").id, worker="paused"))
    expire_leases()
    with django_capture_on_commit_callbacks(execute=True):  # the probe goes out on commit
        engine.sweep()
    claim = Claim.objects.get(run=run)
    assert claim.probe_after == Attempt.objects.get(run=run).lease_expires_at + timedelta(
        seconds=30
    )

    # A probe message that arrives now (early) does not ask the code host yet...
    assert engine.probe_claim(claim_id=claim.id) == "early"
    claim.refresh_from_db()
    assert (claim.status, claim.probed_at) == (ClaimStatus.UNRESOLVED, None)
    probes = [(eta, args) for task, args, eta in published if task == "runs.probe_claim"]
    assert len(probes) == 2  # the one the sweep sent, and the one sent again for later
    for eta, args in probes:
        assert args == (claim.id,)
        assert timedelta(seconds=27) < eta - timezone.now() <= timedelta(seconds=30)

    # ...and once the grace has passed on the database's clock, it does.
    Claim.objects.filter(pk=claim.id).update(probe_after=db_now() - timedelta(seconds=1))
    assert engine.probe_claim(claim_id=claim.id) == "not_applied"
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by) == (ClaimStatus.FAILED, "probe")


# A guarded step that reports the fencing token it was given (its first attempt refused).
token_merge = Workflow("token-merge", version=1, input={})


@token_merge.step(kind=GUARDED, retry=Retry(max_attempts=3, base_delay=0, jitter=False))
def report_token(ctx: Context) -> dict[str, Any]:
    if ctx.attempt == 1:
        raise NotApplied("host refused before doing anything")
    assert ctx.fencing_token is not None
    return {"key": ctx.fencing_token.key, "number": ctx.fencing_token.number}


_workflows = declared(token_merge)


def test_guarded_step_receives_a_fencing_token_increasing_per_attempt(db):
    run = engine.submit_run(workflow=token_merge.name, input={})
    step = step_of(run, "report_token")
    assert engine.execute_step(step_id=step.id, worker="w") == "retrying"  # NotApplied
    Step.objects.filter(pk=step.id).update(next_attempt_at=db_now())
    assert engine.execute_step(step_id=step.id, worker="w") == "succeeded"

    claim = Claim.objects.get(run=run)
    assert step_of(run, "report_token").result == {"key": claim.key, "number": 2}
    assert str(FencingToken(claim.key, 2)) == f"{claim.key}#2"


# --- a partitioned worker's open claim does not use up a step's attempts ------------
def _hold_claim(key: str, run: Run, step: Step, release: threading.Event) -> Background:
    """Another session inserts the claim and keeps its transaction open (a worker whose
    host was cut off mid-effect) until `release` is set; then it rolls back."""

    inserted = threading.Event()

    def hold() -> None:
        with transaction.atomic():
            Claim.objects.create(key=key, run=run, step=step, kind=step.kind)
            inserted.set()
            release.wait(60)
            transaction.set_rollback(True)

    holder = Background(hold)
    assert inserted.wait(10)
    return holder


@pytest.mark.django_db(transaction=True)
def test_transactional_claim_held_by_a_lost_session_defers_without_burning_attempts(settings):
    settings.RUNS_CLAIM_LOCK_TIMEOUT_SECONDS = 0.3
    run = engine.submit_run(workflow="slow-write", input={"marker": "/dev/null", "hold": 0.0})
    step = step_of(run, "write")
    release = threading.Event()
    holder = _hold_claim(keys.step_key(run.id, "write", 1), run, step, release)
    try:
        for _ in range(step.max_attempts + 1):  # more deferrals than the step has attempts
            Step.objects.filter(pk=step.id).update(next_attempt_at=db_now())
            attempt = Background(lambda: engine.execute_step(step_id=step.id, worker="w"))
            assert attempt.join(timeout=10) == "deferred"
    finally:
        release.set()
        holder.join()

    step.refresh_from_db()
    assert (step.status, step.attempts, step.deferred_attempts) == (StepStatus.RETRYING, 4, 4)
    Step.objects.filter(pk=step.id).update(next_attempt_at=db_now())
    assert engine.execute_step(step_id=step.id, worker="w") == "succeeded"
    assert TargetRecord.objects.filter(run_id=run.id).count() == 1
    assert list(
        Attempt.objects.filter(step=step).order_by("number").values_list("status", flat=True)
    ) == [AttemptStatus.DEFERRED] * 4 + [AttemptStatus.SUCCEEDED]
    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED


@pytest.mark.django_db(transaction=True)
def test_map_item_claim_held_by_a_lost_session_defers_the_batch(settings):
    settings.RUNS_CLAIM_LOCK_TIMEOUT_SECONDS = 0.3
    run = engine.submit_run(workflow="migrate-records", input={"count": 4, "batch_size": 4})
    engine.execute_step(step_id=step_of(run, "list_records").id, worker="t")
    batch = step_of(run, "migrate[0]")
    held = batch.items[2]["key"]
    release = threading.Event()
    key = keys.item_key(run.id, "migrate", step_of(run, "migrate").plan_revision, held)
    holder = _hold_claim(key, run, batch, release)
    try:
        attempt = Background(lambda: engine.execute_step(step_id=batch.id, worker="w"))
        assert attempt.join(timeout=10) == "deferred"
    finally:
        release.set()
        holder.join()

    # The items before the held one committed; the retry skips them.
    assert TargetRecord.objects.filter(run_id=run.id).count() == 2
    Step.objects.filter(pk=batch.id).update(next_attempt_at=db_now())
    run_queued(run)
    assert engine.execute_step(step_id=batch.id, worker="w") == "succeeded"
    assert TargetRecord.objects.filter(run_id=run.id).count() == 4
    assert TargetRecord.objects.values("record_id").distinct().count() == 4


def test_database_sessions_end_idle_transactions_and_keep_alive(db, settings):
    with connection.cursor() as cursor:
        cursor.execute("SHOW idle_in_transaction_session_timeout")
        assert cursor.fetchone()[0] == "5min"
    options = settings.DATABASES["default"]["OPTIONS"]
    assert (options["keepalives"], options["keepalives_idle"]) == (1, 30)
    assert "-c tcp_keepalives_idle=30" in options["options"]


# --- concurrent sweeps never deadlock -----------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_two_sweeps_crossing_two_runs_do_not_deadlock(monkeypatch):
    runs = [engine.submit_run(workflow="parallel-pure", input={}) for _ in range(2)]
    for run in runs:
        for key in ("left", "right"):
            start_attempt(step_id=step_of(run, key).id, worker="dead")
    # Expiry order run0.left, run1.left, run1.right, run0.right: sweeps taking two
    # attempts each would take the runs in opposite orders.
    order = [(runs[0], "left"), (runs[1], "left"), (runs[1], "right"), (runs[0], "right")]
    for age, (run, key) in zip((4, 3, 2, 1), order, strict=True):
        Attempt.objects.filter(step=step_of(run, key)).update(
            lease_expires_at=db_now() - timedelta(seconds=age)
        )

    first_crash_done = threading.Event()
    both_hold_a_run = threading.Barrier(2, timeout=10)
    real_crash = recover_module._crash
    seen: set[int] = set()

    def crash_then_meet(attempt, **kwargs):
        real_crash(attempt, **kwargs)
        me = threading.get_ident()
        if me not in seen:  # each sweep holds its first run's row, then waits for the other
            seen.add(me)
            first_crash_done.set()
            both_hold_a_run.wait()

    monkeypatch.setattr(recover_module, "_crash", crash_then_meet)
    a = Background(lambda: engine.sweep(limit=2).crashed)
    first_crash_done.wait(10)
    b = Background(lambda: engine.sweep(limit=2).crashed)
    crashed = a.join() + b.join()

    assert sorted(crashed) == sorted(Attempt.objects.values_list("id", flat=True))
    assert Event.objects.filter(type=events.ATTEMPT_CRASHED).count() == 4


def test_recovery_has_its_own_queue_and_sweeps_expire(settings, published):
    from runs.tasks import probe_claim, sweep

    sweep.delay()
    probe_claim.delay(0)
    queues = {task: queue for task, queue in _routes(published, settings)}
    assert queues == {
        "runs.sweep": settings.CELERY_RECOVERY_QUEUE,
        "runs.probe_claim": settings.CELERY_RECOVERY_QUEUE,
    }
    assert settings.CELERY_RECOVERY_QUEUE != settings.CELERY_TASK_DEFAULT_QUEUE
    beat = settings.CELERY_BEAT_SCHEDULE["recover-expired-attempts"]
    assert beat["options"]["expires"] == settings.RUNS_SWEEP_INTERVAL


def test_operator_work_goes_on_the_control_queue_and_steps_on_the_step_queue(settings):
    """docs/operating.md#what-runs-where-and-why: a batch's messages (its first, its next
    chunk, beat's resume) never wait behind steps' (tests/integration/test_control_queue.py
    shows it with a real worker)."""
    from config.celery import app

    def queue(task: str) -> str:
        return app.amqp.router.route({}, task)["queue"].name

    control = {
        "runs.process_batch",
        "runs.resume_batches",
        "runs.sweep",
        "runs.probe_claim",
        "runs.fire_schedules",
        "reconciliation.webhooks",
    }
    assert {task: queue(task) for task in control} == dict.fromkeys(
        control, settings.CELERY_RECOVERY_QUEUE
    )
    for task in ("runs.execute_step", "runs.apply_retention"):
        assert queue(task) == settings.CELERY_TASK_DEFAULT_QUEUE


def _routes(published, settings):
    from config.celery import app

    for task, _args, _eta in published:
        yield task, app.amqp.router.route({}, task)["queue"].name


# --- a republish is idempotent: one message out per step per bound --------------------


def lose_messages() -> None:
    """The broker loses what its queues hold (this session's queues)."""
    from config.celery import app

    app.control.purge()


@pytest.fixture
def backoff(settings):
    """The sweeper reads the session's real steps queue, emptied first of what earlier
    tests left in it."""
    settings.RUNS_REPUBLISH_BACKOFF = True
    settings.RUNS_REPUBLISH_AFTER_SECONDS = 60
    lose_messages()
    yield
    lose_messages()


def sent_steps(published) -> list[int]:
    return [args[0] for task, args, _ in published if task == "runs.execute_step"]


@pytest.mark.broker
@pytest.mark.django_db(transaction=True)
def test_a_queued_step_whose_message_waits_in_the_broker_is_not_sent_again(backoff, published):
    """A deep queue, not a lost message: the step waited ten minutes (far past the
    bound) with its message still in the broker's queue. Two sweeps send nothing."""
    run = engine.submit_run(workflow="merge-change", input={"change_id": 3})
    merge = step_of(run, "merge")
    assert step_queue_depth() == 1  # its message, waiting for a worker
    earlier([merge.id], 600)
    published.clear()

    assert engine.sweep().republished == []
    assert engine.sweep().republished == []

    assert sent_steps(published) == []
    assert step_queue_depth() == 1
    assert Step.objects.get(pk=merge.id).message_due_at is None


@pytest.mark.broker
@pytest.mark.django_db(transaction=True)
def test_a_lost_message_is_sent_again_once_per_bound_and_queued_at_stays(backoff, published):
    """The broker lost the step's message: the first sweep past the bound sends one,
    the next sweeps none while it is on its way; lost again, a bound later one more.
    queued_at stays since when the step waits; message_due_at says when the newest
    message went out."""
    run = engine.submit_run(workflow="merge-change", input={"change_id": 3})
    merge = step_of(run, "merge")
    lose_messages()
    earlier([merge.id], 61)
    queued_at = Step.objects.get(pk=merge.id).queued_at
    published.clear()

    assert engine.sweep().republished == [merge.id]
    assert engine.sweep().republished == []
    assert sent_steps(published) == [merge.id]
    assert step_queue_depth() == 1
    step = Step.objects.get(pk=merge.id)
    assert step.queued_at == queued_at
    assert step.message_due_at is not None and step.message_due_at > queued_at

    earlier([merge.id], 30)  # half a bound: the message is still on its way
    lose_messages()  # (even if the broker lost it meanwhile)
    assert engine.sweep().republished == []
    earlier([merge.id], 31)  # a bound since it went out: lost
    assert engine.sweep().republished == [merge.id]
    assert engine.sweep().republished == []
    assert sent_steps(published) == [merge.id, merge.id]
    assert Step.objects.get(pk=merge.id).queued_at == queued_at - timedelta(seconds=61)
    assert engine.execute_step(step_id=merge.id, worker="t") == "succeeded"


@pytest.mark.broker
@pytest.mark.django_db(transaction=True)
def test_a_sweep_sends_no_more_messages_than_the_queue_lacks(backoff, published):
    """Three steps waited past the bound; the broker holds the messages of two of them
    (the third's was lost). Which one is lost the sweep cannot know, but that one is:
    it sends one message, the oldest step's, not one per step (bench/backlog.py: 200
    sent into a backlog whose queue lacked 3 or 4)."""
    runs = [engine.submit_run(workflow="merge-change", input={"change_id": n}) for n in (1, 2, 3)]
    merges = [step_of(run, "merge").id for run in runs]
    lose_messages()
    publish.publish_now(merges[1:])  # two still have theirs
    earlier(merges, 61)
    published.clear()

    assert engine.sweep().republished == [merges[0]]
    assert sent_steps(published) == [merges[0]]
    assert step_queue_depth() == 3
    assert engine.sweep().republished == []  # none lacks a message now


def test_a_broker_whose_queue_cannot_be_read_does_not_stop_the_republish(db, settings):
    settings.RUNS_REPUBLISH_BACKOFF = True
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    run = engine.submit_run(workflow="merge-change", input={"change_id": 3})
    merge = step_of(run, "merge")
    earlier([merge.id], settings.RUNS_REPUBLISH_AFTER_SECONDS + 1)

    assert engine.sweep().republished == [merge.id]
    assert engine.sweep().republished == []


# --- a retry woken early waits for its time, not for the sweeper --------------------
def test_retry_message_arriving_early_is_sent_again_for_the_remaining_delay(db, published):
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    step = step_of(run, "charge")
    started = start_attempt(step_id=step.id, worker="w")
    fail_attempt(started, error="boom", uncertain=True)
    Step.objects.filter(pk=step.id).update(next_attempt_at=db_now() + timedelta(seconds=20))
    published.clear()

    assert engine.execute_step(step_id=step.id, worker="early") == "skipped"

    assert [(task, args) for task, args, _ in published] == [("runs.execute_step", (step.id,))]
    # (now() is frozen inside this test's transaction: compare with the wall clock.)
    eta = published[0][2]
    assert timedelta(seconds=18) < eta - timezone.now() <= timedelta(seconds=20)
    step.refresh_from_db()
    assert (step.status, step.attempts) == (StepStatus.RETRYING, 1)


def test_a_retry_due_in_an_hour_is_sent_in_messages_no_longer_than_the_bound(
    db, published, settings
):
    """A worker holds a message with a countdown unacknowledged until it is due; a
    broker takes one held past its bound for lost (Redis's visibility timeout,
    RabbitMQ's consumer_timeout). So no countdown is longer than
    RUNS_MAX_COUNTDOWN_SECONDS: each message that comes before the retry's time on the
    database's clock sends the next."""
    settings.RUNS_MAX_COUNTDOWN_SECONDS = 600
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    step = step_of(run, "charge")
    started = start_attempt(step_id=step.id, worker="w")
    fail_attempt(started, error="boom", uncertain=True)
    Step.objects.filter(pk=step.id).update(next_attempt_at=db_now() + timedelta(hours=1))
    published.clear()

    assert engine.execute_step(step_id=step.id, worker="early") == "skipped"

    assert [(task, args) for task, args, _ in published] == [("runs.execute_step", (step.id,))]
    eta = published[0][2]
    assert timedelta(seconds=590) < eta - timezone.now() <= timedelta(seconds=600)
    step.refresh_from_db()
    assert (step.status, step.attempts) == (StepStatus.RETRYING, 1)


def test_a_probe_due_later_than_the_bound_is_sent_for_the_bound(published, settings):
    from runs.engine.tools import publish_probes

    settings.RUNS_MAX_COUNTDOWN_SECONDS = 600

    publish_probes([41, 42], {41: 3600.0, 42: 30.0})

    etas = {args: eta - timezone.now() for _task, args, eta in published}
    assert timedelta(seconds=590) < etas[(41,)] <= timedelta(seconds=600)
    assert timedelta(seconds=20) < etas[(42,)] <= timedelta(seconds=30)


# --- "failed" means the effect did not happen ---------------------------------------
def test_idempotent_step_killed_after_its_effect_every_time_is_abandoned_not_failed(db):
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    step = step_of(run, "charge")
    for _ in range(step.max_attempts):
        started = start_attempt(step_id=step.id, worker="oom")
        PaymentAPI().charge(amount=5, idempotency_key=started.claim.key)  # the effect...
        expire_leases()  # ...then the worker died before recording it
        assert len(engine.sweep().crashed) == 1

    run.refresh_from_db()
    claim = Claim.objects.get(run=run)
    assert (run.status, step_of(run, "charge").status, claim.status) == (
        RunStatus.FAILED,
        StepStatus.FAILED,
        ClaimStatus.ABANDONED,
    )
    assert PaymentCharge.objects.filter(idempotency_key=claim.key).count() == 1
    out = io.StringIO()
    call_command("show_run", str(run.id), "--json", stdout=out)
    assert json.loads(out.getvalue())["claims"] == [
        {
            "key": claim.key,
            "status": "abandoned",
            "step": "charge",
            "kind": "idempotent",
            "item_key": None,
        }
    ]


# --- resolving a claim of a finished run schedules nothing --------------------------
@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_resolution_of_a_failed_run_records_the_outcome_and_schedules_nothing(
    db, outcome, published
):
    run = engine.submit_run(workflow="doomed-beside-guarded", input={})
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert step_of(run, "deploy_now").status == StepStatus.UNRESOLVED
    published.clear()

    resolution = resolve_claim(
        Claim.objects.get(run=run, step__name="deploy_now"),
        outcome,
        actor="ann",
        note="checked the deploy API",
    )

    assert (resolution.step_status, resolution.run_status) == (outcome, RunStatus.FAILED)
    assert step_of(run, "after_deploy").status == StepStatus.PENDING
    assert published == []
    assert Step.objects.filter(run=run, status=StepStatus.QUEUED).count() == 0


# --- verify_history reads a live run from one snapshot -----------------------------
@pytest.mark.django_db(transaction=True)
def test_verify_run_of_a_run_moving_on_meanwhile_reports_nothing(monkeypatch):
    run = engine.submit_run(workflow="pure-chain", input={})
    events_read = threading.Event()
    moved_on = threading.Event()
    real_project = history.project

    def project_then_pause(run_id):
        projection = real_project(run_id)
        events_read.set()
        moved_on.wait(10)
        return projection

    monkeypatch.setattr(history, "project", project_then_pause)
    checker = Background(lambda: history.verify_run(run))
    events_read.wait(10)
    engine.execute_step(step_id=step_of(run, "first").id, worker="w")  # the run moves on
    moved_on.set()

    assert checker.join() == []
