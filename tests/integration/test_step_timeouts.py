"""Step timeouts against real worker processes (docs/authoring.md#timeouts): a hung
call is stopped at its timeout and its worker goes on serving other runs; a call that
ignores the stop costs its worker process, which the pool replaces; a guarded step
that hangs becomes unresolved with the timeout as its reason."""

from __future__ import annotations

import pytest

from runs import engine
from runs.models import Attempt, Event, Step
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from tests.support.timeout_workflows import TIMEOUT

from .helpers import wait_settled

pytestmark = [pytest.mark.workers]


def _timed_out(run) -> list[dict]:
    return list(
        Event.objects.filter(run=run, type="attempt_timed_out").values_list("payload", flat=True)
    )


def test_a_hung_pure_step_is_stopped_at_its_timeout_and_its_worker_serves_another_run(cluster):
    cluster.worker()  # one solo worker: while the step hangs, nothing else can run on it
    hung = engine.submit_run(workflow="hangs-once", input={"ignores_signals": False})
    other = engine.submit_run(workflow="quick-one", input={})

    other = wait_settled(other, cluster, timeout=60)
    hung = wait_settled(hung, cluster, timeout=60)

    assert (other.status, hung.status) == (RunStatus.SUCCEEDED, RunStatus.SUCCEEDED), cluster.logs()
    first, second = Attempt.objects.filter(run=hung).order_by("number")
    assert first.status == AttemptStatus.FAILED
    assert "timeout of 2 s" in first.error
    # Stopped at its timeout, on the database's clock, not at a lease's end (30 s).
    ran = (first.finished_at - first.started_at).total_seconds()
    assert TIMEOUT <= ran < TIMEOUT + 5, ran
    assert second.status == AttemptStatus.SUCCEEDED
    assert Step.objects.get(run=hung).result == {"attempt": 2}
    assert _timed_out(hung) == [{"step": "hang", "seconds": TIMEOUT}]
    # The other run's step ran on the same worker after the hung one was stopped.
    (quick,) = Attempt.objects.filter(run=other)
    assert quick.started_at >= first.finished_at


def test_a_call_that_ignores_the_stop_costs_its_process_and_the_step_is_retried(cluster):
    # A prefork pool: its child ends itself past the timeout's grace, and the pool
    # starts another one, which recovers the step (its lease ends there too).
    worker = cluster.worker(pool=("-P", "prefork", "-c", "1"), RUNS_STEP_TIMEOUT_GRACE_SECONDS="1")
    cluster.beat()
    run = engine.submit_run(workflow="hangs-once", input={"ignores_signals": True})

    run = wait_settled(run, cluster, timeout=90)

    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    first, second = Attempt.objects.filter(run=run).order_by("number")
    assert first.status == AttemptStatus.CRASHED
    assert "timed out after 2 s" in first.error
    assert second.status == AttemptStatus.SUCCEEDED
    assert _timed_out(run) == [{"step": "hang", "seconds": TIMEOUT, "replaced": True}]
    log = worker.output()
    assert "did not stop at its timeout: ending worker process" in log
    assert "SIGKILL" in log  # the pool saw its child end, and started another


def test_a_hung_guarded_step_becomes_unresolved_with_its_timeout_as_the_reason(cluster):
    cluster.worker()
    run = engine.submit_run(workflow="hangs-guarded", input={})

    run = wait_settled(run, cluster, timeout=60)

    assert run.status == RunStatus.NEEDS_RECONCILIATION, cluster.logs()
    step = Step.objects.get(run=run)
    assert step.status == StepStatus.UNRESOLVED
    (claim,) = step.claims.all()
    assert claim.status == ClaimStatus.UNRESOLVED
    assert "timeout of 2 s" in claim.error
    (attempt,) = Attempt.objects.filter(run=run)
    assert attempt.status == AttemptStatus.UNRESOLVED
    assert _timed_out(run) == [{"step": "call_and_hang", "seconds": TIMEOUT}]
