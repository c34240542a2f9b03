"""What send_signal() accepts: a signal that no wait of the run can consume any more is
refused (it would be kept forever while its sender believes it arrived), and a second
signal of a name its wait takes once is a duplicate, whether or not the wait already
took the first."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runs import engine
from runs.errors import DuplicateSignal, WaitFinished
from runs.models import Run, Signal, Step
from runs.states import RunStatus, StepStatus
from runs.testing import on_commit_callbacks_run, run_inline
from runs.workflows import Context, Workflow
from tests.support.api import error_of, token_client
from tests.support.declared import declared

pytestmark = pytest.mark.django_db


# Two waits of one run: one times out and goes on, the other waits on.
two_waits = Workflow("two-waits", version=1)


@two_waits.wait(signal="ping", after=[], timeout=timedelta(seconds=1), on_timeout="continue")
def ping(ctx: Context) -> None:
    """Goes on without its signal after a second."""


@two_waits.wait(signal="pong", after=[])
def pong(ctx: Context) -> None:
    """Waits for its signal."""


_workflows = declared(two_waits)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def _execute(run: Run, *keys: str) -> Run:
    for key in keys:
        with on_commit_callbacks_run():
            engine.execute_step(step_id=step_of(run, key).id, worker="t")
    run.refresh_from_db()
    return run


def test_a_signal_whose_wait_timed_out_is_refused():
    run = run_inline(two_waits)  # ping's timeout is skipped: it went on without it
    assert step_of(run, "ping").result == {"timed_out": True}
    assert run.status == RunStatus.WAITING  # pong still waits

    with pytest.raises(WaitFinished) as refused:
        engine.send_signal(run_id=run.id, name="ping", payload={"late": True}, actor="ann")

    assert "ping" in str(refused.value) and "timed out" in str(refused.value)
    assert not Signal.objects.filter(run=run, name="ping").exists()


def _past_a_skipped_wait() -> Run:
    """A compensated-order run told not to wait: its wait `go` was skipped by its
    condition, `finish` is queued, the run still runs."""
    run = engine.submit_run(workflow="compensated-order", input={"outcome": "ok"})
    run = _execute(run, "reserve", "charge")
    assert step_of(run, "go").status == StepStatus.SKIPPED
    assert (run.status, step_of(run, "finish").status) == (RunStatus.RUNNING, StepStatus.QUEUED)
    return run


def test_a_signal_to_a_wait_skipped_by_its_condition_is_refused():
    run = _past_a_skipped_wait()

    with pytest.raises(WaitFinished) as refused:
        engine.send_signal(run_id=run.id, name="go", payload=None, actor="ann")

    assert str(refused.value) == (
        f"run {run.id} no longer waits for signal 'go': go was skipped by its condition; "
        "the signal was not sent"
    )
    assert not Signal.objects.filter(run=run).exists()
    assert _execute(run, "finish").status == RunStatus.SUCCEEDED


def test_api_answers_a_signal_to_a_skipped_wait_409_wait_finished(operator):
    run = _past_a_skipped_wait()

    response = token_client(operator).post(
        f"/api/runs/{run.id}/signals/go/", {"payload": {"go": True}}, format="json"
    )

    error = error_of(response, 409, "wait_finished")
    assert "go was skipped by its condition" in error["message"]
    assert "fields" not in error
    assert not Signal.objects.filter(run=run).exists()


def test_the_schema_lists_wait_finished_among_the_signal_conflicts(operator):
    schema = token_client(operator).get("/api/schema/").json()
    [signal] = [
        op
        for item in schema["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and op.get("operationId") == "runs_signal"
    ]
    conflicts = signal["responses"]["409"]["description"]
    assert "wait_finished:" in conflicts and "duplicate_signal:" in conflicts
    assert "wait_finished" in (engine.send_signal.__doc__ or "")
    assert "WaitFinished" in (engine.send_signal.__doc__ or "")


def _approval_taken() -> Run:
    """A wait-approval run whose wait took its `approval` signal; `act` is queued."""
    run = engine.submit_run(workflow="wait-approval", input={"order": 7})
    run = _execute(run, "prepare", "approval")
    assert step_of(run, "approval").status == StepStatus.WAITING
    with on_commit_callbacks_run():
        engine.send_signal(run_id=run.id, name="approval", payload="yes", actor="ann")
    run = _execute(run, "approval")
    assert step_of(run, "approval").result == {"payload": "yes", "actor": "ann", "timed_out": False}
    assert (run.status, step_of(run, "act").status) == (RunStatus.RUNNING, StepStatus.QUEUED)
    return run


def test_a_second_signal_after_its_wait_took_the_first_is_a_duplicate(operator):
    run = _approval_taken()

    with pytest.raises(DuplicateSignal, match="already received signal 'approval'"):
        engine.send_signal(run_id=run.id, name="approval", payload="again", actor="bob")
    response = token_client(operator).post(
        f"/api/runs/{run.id}/signals/approval/", {"payload": "again"}, format="json"
    )

    error = error_of(response, 409, "duplicate_signal")
    assert "from ann" in error["message"]
    assert list(Signal.objects.filter(run=run).values_list("payload", "actor")) == [("yes", "ann")]
