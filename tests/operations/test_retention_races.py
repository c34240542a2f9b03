"""Retention against the engine and the operators: a purge stage and a retry, a
resubmission and the dedup purge, a policy changed mid-purge. Real interleavings of two
PostgreSQL sessions (tests/support/races.py), no sleeps. Retention's stages take the run row
first like every other transaction (docs/architecture.md, "Locks")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.db.models import F

from runs import engine
from runs.engine import retention
from runs.engine.tools import faults, submit_module
from runs.engine.tools import operate_module as operate
from runs.errors import StepNotRetryable
from runs.models import Claim, MapRegistry, RetentionPolicy, Run, Step, SubmissionKey
from runs.states import RunStatus
from runs.workflows import PURE, TRANSACTIONAL, Context, Field, Retry, Workflow
from tests.support.declared import declared
from tests.support.races import Background, is_waiting_on_lock
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


# A map whose collector fails on its first attempt: the run fails after every item
# completed, and a retry of `gather` reads the items' results again.
collect_map_fails_once = Workflow(
    "collect-map-fails-once", version=1, input={"count": int, "batch_size": Field(int, default=50)}
)


@collect_map_fails_once.step(kind=PURE)
def numbers(ctx: Context) -> list[int]:
    return list(range(ctx.input["count"]))


@collect_map_fails_once.map_step(over="numbers", batch_size="batch_size", kind=TRANSACTIONAL)
def double(ctx: Context, n: int) -> int:
    return n * 2


@collect_map_fails_once.step(kind=PURE, collect="double", retry=Retry(max_attempts=1))
def gather(ctx: Context) -> dict[str, Any]:
    if ctx.attempt == 1:
        raise RuntimeError("gather fails on its first attempt")
    assert ctx.collected is not None
    return {"values": list(ctx.collected)}


_workflows = declared(collect_map_fails_once)


# --- helpers -----------------------------------------------------------------------------
def drive(run: Run) -> Run:
    """Execute the run's queued steps in this process until it finishes."""
    while Run.objects.filter(pk=run.pk, finished_at__isnull=True).exists() and (
        step := Step.objects.filter(run=run, status="queued").order_by("id").first()
    ):
        engine.execute_step(step_id=step.id, worker="t")
    run.refresh_from_db()
    return run


def age(run: Run, days: int) -> None:
    """Pretend the run finished `days` ago."""
    Run.objects.filter(pk=run.pk).update(finished_at=F("finished_at") - timedelta(days=days))


def default_policy() -> RetentionPolicy:
    """The default policy (its migration creates it; a transactional test's flush does
    not leave it behind for the next)."""
    return RetentionPolicy.objects.get_or_create(workflow="", defaults={"name": "default"})[0]


def run_stage(stage: str, policy: RetentionPolicy | None = None) -> dict[str, int]:
    """One stage of a purge to its end, batch after batch, and nothing else."""
    run_batch, _ = retention._STAGES[stage]
    totals: dict[str, int] = {}
    while True:
        with transaction.atomic():
            done = run_batch(policy or default_policy(), 1000)
        if not done:
            return totals
        for key, value in done.items():
            totals[key] = totals.get(key, 0) + value


def _settled(job: Background) -> bool:
    return not job.thread.is_alive() or is_waiting_on_lock(job.pid)


class PausePoint:
    """Hold a session at a point of its transaction: `reached` is set when it gets
    there, and it goes on once `resume` is set."""

    def __init__(self) -> None:
        self.reached, self.resume = threading.Event(), threading.Event()

    def hold(self) -> None:
        self.reached.set()
        assert self.resume.wait(30), "the test never resumed the paused session"

    def wait(self) -> None:
        assert self.reached.wait(30), "the session never reached its pause point"


def pause_retention_after(
    monkeypatch: pytest.MonkeyPatch, stage: str, after: int = 1, *, committed: bool = False
) -> PausePoint:
    """Pause the purge in the transaction of its `after`-th batch of `stage`, its work
    done, before it commits (the point crash tests kill it at); with `committed`, right
    after that batch commits, before the next one starts."""
    pause, real, seen = PausePoint(), faults.hit, [0]

    def hit(point: str, step_name: str) -> None:
        if (point, step_name) == ("after_effect", f"retention-{stage}"):
            seen[0] += 1
            if seen[0] == after:
                if committed:
                    transaction.on_commit(pause.hold)
                else:
                    pause.hold()
        real(point, step_name)

    monkeypatch.setattr(faults, "hit", hit)
    return pause


# --- a retry and the registry stage ------------------------------------------------------
def failed_after_its_map() -> Run:
    """A run whose map completed every item, then whose collector failed: the run
    failed, `gather` can be retried and reads the items' results again."""
    run = engine.submit_run(
        workflow=collect_map_fails_once.name, input={"count": 4, "batch_size": 2}
    )
    run = drive(run)
    assert run.status == RunStatus.FAILED
    assert Claim.objects.filter(run=run, item_key__isnull=False, status="succeeded").count() == 4
    age(run, 100)
    return run


def test_a_run_whose_map_registry_was_compacted_cannot_be_retried():
    """The registry stage deleted the items' claims (their results with them) before the
    payload stage marked the run compacted: a retry of `gather` would read None for
    every item and succeed with it."""
    run = failed_after_its_map()
    assert run_stage("registry")["claims_deleted"] == 4
    run.refresh_from_db()
    assert run.payloads_compacted_at is None

    with pytest.raises(StepNotRetryable, match="retention"):
        engine.retry_steps(run_id=run.id, step_keys=["gather"], actor="ann")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED


def test_the_retry_preview_refuses_like_the_retry_once_the_registry_stage_ran():
    """The preview counted a map's completed items from their claims only: after the
    registry stage it listed none (and offered a retry that would read None for each)."""
    run = failed_after_its_map()
    run_stage("registry")
    with pytest.raises(StepNotRetryable, match="retention"):
        engine.preview_retry(run_id=run.id, step_keys=["gather"])


def test_a_retry_waits_for_the_registry_stage_in_flight_and_is_refused(monkeypatch):
    """The registry stage has deleted the items' claims, not yet committed; an operator
    retries `gather`. The retry must wait for the stage (both take the run row first)
    and then be refused, not reopen the run under it."""
    run = failed_after_its_map()
    pause = pause_retention_after(monkeypatch, "registry")
    purge = Background(lambda: retention.purge(policy=default_policy()))
    pause.wait()
    retry = Background(lambda: engine.retry_steps(run_id=run.id, step_keys=["gather"], actor="ann"))
    wait_for(lambda: _settled(retry), timeout=30, what="the retry to finish or wait")
    pause.resume.set()
    purge.join()
    with pytest.raises(StepNotRetryable, match="retention"):
        retry.join()
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.retention_started_at is not None


def test_the_registry_stage_skips_a_run_a_retry_holds_and_the_retry_reads_every_item(
    monkeypatch,
):
    """An operator's retry holds the run (it is reopening it); the registry stage comes
    by meanwhile. It must leave the run alone (the run is running once the retry
    commits), so that `gather` still reads every item's result."""
    run = failed_after_its_map()
    pause, real = PausePoint(), operate._checked_run

    def checked(run_id: Any) -> Run:
        checked_run = real(run_id)
        pause.hold()
        return checked_run

    monkeypatch.setattr(operate, "_checked_run", checked)
    retry = Background(lambda: engine.retry_steps(run_id=run.id, step_keys=["gather"], actor="ann"))
    pause.wait()
    stage = Background(lambda: run_stage("registry"))
    wait_for(lambda: _settled(stage), timeout=30, what="the stage to finish or wait")
    pause.resume.set()
    retry.join()
    done = stage.join()
    monkeypatch.undo()

    assert done == {}
    assert not MapRegistry.objects.filter(run=run).exists()
    run = drive(run)
    assert run.status == RunStatus.SUCCEEDED
    assert run.result == {"gather": {"values": [0, 2, 4, 6]}}


# --- a resubmission and the dedup purge --------------------------------------------------
def test_a_resubmission_racing_the_dedup_purge_of_its_key_gets_a_run_not_an_error(
    monkeypatch,
):
    """A resubmission finds the key taken (its INSERT … ON CONFLICT DO NOTHING locks
    nothing); before it reads the key, the dedup purge deletes it and commits. The
    resubmission must not fail for the key it no longer finds: the dedup window is over,
    so it is a new submission."""
    first = engine.submit(workflow="pure-chain", input={}, key="order-9").run
    first = drive(first)
    age(first, 100)
    retention.purge(policy=default_policy())  # payloads and events; the key stays
    age(first, 300)
    pause, real = PausePoint(), submit_module._claim_key

    def claim_key(scope: str, key: str, run_id: Any, digest: str) -> bool:
        claimed = real(scope, key, run_id, digest)
        if not claimed and not pause.reached.is_set():
            pause.hold()
        return claimed

    monkeypatch.setattr(submit_module, "_claim_key", claim_key)
    again = Background(lambda: engine.submit(workflow="pure-chain", input={}, key="order-9"))
    pause.wait()
    purge = Background(lambda: run_stage("dedup"))
    wait_for(lambda: _settled(purge), timeout=30, what="the purge to finish or wait")
    pause.resume.set()
    submission = again.join()
    assert purge.join()["submission_keys_deleted"] == 1
    monkeypatch.undo()

    assert submission.created and submission.run.id != first.id
    assert SubmissionKey.objects.get(key="order-9").run_id == submission.run.id
    assert not SubmissionKey.objects.filter(run=first).exists()


# --- a policy changed while its purge runs -----------------------------------------------
def two_runs_past_their_dedup_window() -> list[Run]:
    """Two finished runs with submission keys, their payloads and events already purged,
    now past the default dedup window (365 days): one dedup batch each (batch=20)."""
    runs = []
    for key in ("order-1", "order-2"):
        runs.append(drive(engine.submit(workflow="pure-chain", input={}, key=key).run))
    for run in runs:
        age(run, 100)
    retention.purge(policy=default_policy())
    for run in runs:
        age(run, 300)
    return runs


def purge_while_the_policy_changes(
    monkeypatch: pytest.MonkeyPatch, change: Callable[[RetentionPolicy], None]
) -> retention.PolicyResult:
    """Purge the default policy one run per batch; once its first dedup batch has
    committed, before the next one starts, an operator changes the policy in another
    session."""
    policy = default_policy()
    pause = pause_retention_after(monkeypatch, "dedup", committed=True)
    purge = Background(lambda: retention.purge(policy=policy, batch=20))
    pause.wait()
    Background(lambda: change(RetentionPolicy.objects.get(pk=policy.pk))).join()
    pause.resume.set()
    result = purge.join()
    monkeypatch.undo()
    return result


def purged(runs: list[Run]) -> list[bool]:
    return [Run.objects.get(pk=r.pk).claims_purged_at is not None for r in runs]


def test_a_dedup_window_lengthened_mid_purge_applies_from_the_next_batch(monkeypatch):
    runs = two_runs_past_their_dedup_window()

    def lengthen(policy: RetentionPolicy) -> None:
        policy.dedup_days = 1000
        policy.save()

    result = purge_while_the_policy_changes(monkeypatch, lengthen)
    assert sorted(purged(runs)) == [False, True]
    assert SubmissionKey.objects.count() == 1
    assert result.counts["dedup"]["submission_keys_deleted"] == 1


def test_a_policy_disabled_mid_purge_stops_it(monkeypatch):
    runs = two_runs_past_their_dedup_window()

    def disable(policy: RetentionPolicy) -> None:
        policy.enabled = False
        policy.save()

    result = purge_while_the_policy_changes(monkeypatch, disable)
    assert sorted(purged(runs)) == [False, True]
    assert SubmissionKey.objects.count() == 1
    assert "disabled" in result.line()


def test_a_policy_deleted_mid_purge_stops_it(monkeypatch):
    runs = two_runs_past_their_dedup_window()
    result = purge_while_the_policy_changes(monkeypatch, lambda policy: policy.delete())
    assert sorted(purged(runs)) == [False, True]
    assert SubmissionKey.objects.count() == 1
    assert "deleted" in result.line()


def test_a_batch_starting_while_its_policy_is_being_deleted_waits_and_stops(monkeypatch):
    """The deletion has cleared the purge's record (SET NULL) and deleted the policy, not
    yet committed, when the next batch starts: the batch must wait for it and stop, not
    read the policy still there and purge under it."""
    runs = two_runs_past_their_dedup_window()
    policy = default_policy()
    between = pause_retention_after(monkeypatch, "dedup", committed=True)
    purge = Background(lambda: retention.purge(policy=policy, batch=20))
    between.wait()
    deleting = PausePoint()

    def delete() -> None:
        with transaction.atomic():
            RetentionPolicy.objects.get(pk=policy.pk).delete()
            deleting.hold()

    deleter = Background(delete)
    deleting.wait()
    between.resume.set()
    purge.wait_blocked()
    deleting.resume.set()
    deleter.join()
    result = purge.join()
    monkeypatch.undo()
    assert sorted(purged(runs)) == [False, True]
    assert "deleted" in result.line()
