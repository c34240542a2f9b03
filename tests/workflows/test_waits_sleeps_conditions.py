"""Authoring in-process, through runs.testing.run_inline and the engine's
services: waits and signals, sleeps, conditions, ctx.results, collected results."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

from runs import engine
from runs.errors import DuplicateSignal, RunNotActive, RunNotFound, UnknownSignal
from runs.models import Event, Run, Signal, Step
from runs.testing import run_inline
from runs.workflows import (
    GUARDED,
    PURE,
    TRANSACTIONAL,
    Context,
    Field,
    Retry,
    Workflow,
    WorkflowDefinitionError,
)
from tests.support.declared import declared

pytestmark = pytest.mark.django_db


# A branch that waits for a signal beside a guarded one whose outcome stays unknown.
branch_wait = Workflow("branch-wait", version=1)


@branch_wait.wait(signal="go", after=[])
def hold_on(ctx: Context) -> None:
    """Waits while the other branch runs."""


@branch_wait.step(kind=GUARDED, after=[], retry=Retry(max_attempts=1))
def poke(ctx: Context) -> str:
    raise TimeoutError("no answer")


_workflows = declared(branch_wait)


def _events(run: Run, type: str) -> list[Event]:
    return list(Event.objects.filter(run=run, type=type).order_by("seq"))


def _step(run: Run, name: str) -> Step:
    return Step.objects.get(run=run, name=name, parent__isnull=True)


# --- waits and signals ---------------------------------------------------------------
def test_wait_parks_without_a_signal_and_a_signal_completes_it():
    run = run_inline("queued-signals")  # waits with no timeout: only a signal moves it
    assert run.status == "waiting"
    assert run.step_statuses == {"first_tick": "waiting", "second_tick": "pending"}
    assert _step(run, "first_tick").attempts == 0  # no worker held, no attempt

    run = run_inline("wait-approval", input={"order": 8}, signals={"approval": {"ok": True}})
    assert run.status == "succeeded"
    assert run.results["approval"] == {
        "payload": {"ok": True},
        "actor": "run_inline",
        "timed_out": False,
    }
    assert run.results["act"] == {"order": 8, "decision": run.results["approval"]}
    [received] = _events(run, "signal_received")
    assert received.payload["actor"] == "run_inline"
    assert len(_events(run, "signal_consumed")) == 1
    assert len(_events(run, "run_waiting")) == 1 and len(_events(run, "run_woken")) == 1


def test_signal_sent_before_the_wait_is_kept_and_consumed():
    run = engine.submit_run(workflow="wait-approval", input={"order": 1})
    signal = engine.send_signal(run_id=run.id, name="approval", payload="yes", actor="ada")
    assert signal.consumed_by_step_id is None
    assert _step(run, "approval").status == "pending"
    # drive it: the first step runs, the wait consumes the kept signal at once
    from runs.testing import on_commit_callbacks_run  # the harness's commit simulation

    for _ in range(3):
        for step in Step.objects.filter(run=run, status="queued"):
            with on_commit_callbacks_run():
                engine.execute_step(step_id=step.id, worker="test")
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert _step(run, "approval").result == {"payload": "yes", "actor": "ada", "timed_out": False}
    assert not _events(run, "step_waiting")  # never waited
    signal.refresh_from_db()
    assert signal.consumed_by_step_id == _step(run, "approval").id


def test_send_signal_refusals_change_nothing():
    run = engine.submit_run(workflow="wait-approval", input={"order": 1})
    import uuid

    with pytest.raises(RunNotFound):
        engine.send_signal(run_id=uuid.uuid4(), name="approval", actor="ada")
    with pytest.raises(UnknownSignal, match="waits for 'approval'"):
        engine.send_signal(run_id=run.id, name="aproval", actor="ada")
    engine.send_signal(run_id=run.id, name="approval", payload=1, actor="ada")
    with pytest.raises(DuplicateSignal, match="already received signal 'approval'"):
        engine.send_signal(run_id=run.id, name="approval", payload=2, actor="bob")
    assert Signal.objects.filter(run=run).count() == 1
    assert len(_events(run, "signal_received")) == 1
    engine.cancel_run(run_id=run.id, actor="ada")
    with pytest.raises(RunNotActive):
        engine.send_signal(run_id=run.id, name="approval", actor="ada")


def test_queued_signals_are_consumed_in_order():
    run = engine.submit_run(workflow="queued-signals", input={})
    engine.send_signal(run_id=run.id, name="tick", payload=1, actor="a")
    engine.send_signal(run_id=run.id, name="tick", payload=2, actor="b")
    from runs.testing import on_commit_callbacks_run

    for _ in range(2):
        for step in Step.objects.filter(run=run, status="queued"):
            with on_commit_callbacks_run():
                engine.execute_step(step_id=step.id, worker="test")
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert _step(run, "first_tick").result["payload"] == 1
    assert _step(run, "second_tick").result["payload"] == 2


def test_wait_timeout_fails_or_continues():
    # No signal: the harness lets the timeout pass (the sweeper wakes the timer).
    run = run_inline("wait-approval", input={"order": 1})
    assert run.status == "failed"
    assert run.step_statuses == {"prepare": "succeeded", "approval": "failed", "act": "pending"}
    assert "before its timeout" in _step(run, "approval").error

    run = run_inline("wait-continue")
    assert run.status == "succeeded"
    assert run.results == {"nudge": {"timed_out": True}, "after_nudge": {"timed_out": True}}


def test_sleep_wakes_after_its_time():
    run = run_inline("sleepy", input={"seconds": 3600})
    assert run.status == "succeeded"
    assert run.results["woke"] == "awake"
    assert "slept_until" in run.results["nap"]
    assert len(_events(run, "step_waiting")) == 1


def test_send_signal_command_prints_one_line(capsys, operator):
    run = run_inline("queued-signals")
    call_command(
        "send_signal", str(run.id), "tick", "--payload", '{"ok": true}', "--actor", "olivia"
    )
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "tick" in out[0] and str(run.id) in out[0]
    assert _step(run, "first_tick").status == "queued"
    run.refresh_from_db()
    assert run.status == "running"


# --- conditions and results ------------------------------------------------------------
# A step that runs only when `decide` says so, and a report that runs either way.
conditional = Workflow("conditional", version=1, input={"ship": bool})


@conditional.step(kind=PURE)
def decide(ctx: Context) -> bool:
    return bool(ctx.input["ship"])


@conditional.step(kind=PURE, when=lambda ctx: ctx.results["decide"])
def ship(ctx: Context) -> str:
    return "shipped"


@conditional.step(kind=PURE)
def report(ctx: Context) -> dict[str, Any]:
    return {"decided": ctx.results["decide"], "ship": ctx.results["ship"]}


# A map whose collector reads every item's result, in item order.
collect_map = Workflow(
    "collect-map", version=1, input={"count": int, "batch_size": Field(int, default=50)}
)


@collect_map.step(kind=PURE)
def numbers(ctx: Context) -> list[int]:
    return list(range(ctx.input["count"]))


@collect_map.map_step(over="numbers", batch_size="batch_size", kind=TRANSACTIONAL)
def double(ctx: Context, n: int) -> int:
    return n * 2


@collect_map.step(kind=PURE, collect="double")
def gather(ctx: Context) -> dict[str, Any]:
    assert ctx.collected is not None
    values = list(ctx.collected)
    return {
        "len": len(ctx.collected),
        "ordered": values == [n * 2 for n in range(len(values))],
        "sum": sum(values),
    }


_results_workflows = declared(conditional, collect_map)


@pytest.mark.parametrize("ship", [True, False])
def test_condition_skips_a_step_and_dependents_proceed(ship):
    run = run_inline(conditional, input={"ship": ship})
    assert run.status == "succeeded"
    if ship:
        assert run.step_statuses["ship"] == "succeeded"
        assert run.results["report"] == {"decided": True, "ship": "shipped"}
    else:
        assert run.step_statuses["ship"] == "skipped"
        assert run.results["report"] == {"decided": False, "ship": None}
        assert len(_events(run, "step_skipped")) == 1
        assert Step.objects.get(run=run, name="ship").attempts == 0


def test_collected_results_of_a_5000_item_map_in_item_order():
    run = run_inline(collect_map, input={"count": 5000, "batch_size": 50})
    assert run.status == "succeeded"
    assert run.results["gather"] == {"len": 5000, "ordered": True, "sum": 5000 * 4999}


def test_definition_refuses_bad_authoring_declarations():
    wf = Workflow("bad-authoring", version=1)

    @wf.step(kind=PURE)
    def first(ctx: Context) -> int:
        return 1

    with pytest.raises(WorkflowDefinitionError, match="not a map step"):
        wf.step(kind=PURE, collect="first")(lambda ctx: None)
    with pytest.raises(WorkflowDefinitionError, match="compensation 'undo'"):
        wf.step(kind=PURE, compensate="undo", name="x")(lambda ctx: None)
    with pytest.raises(WorkflowDefinitionError, match="on_timeout"):
        wf.wait(signal="s", on_timeout="explode")
    with pytest.raises(WorkflowDefinitionError, match="positive timedelta"):
        wf.wait(signal="s", timeout=0)  # type: ignore[arg-type]


def test_retried_wait_starts_its_timer_again_and_takes_a_late_signal():
    run = run_inline("wait-approval", input={"order": 9})
    assert run.status == "failed"
    engine.retry_steps(run_id=run.id, step_keys=["approval"], actor="ada")
    assert _step(run, "approval").wake_at is None
    engine.send_signal(run_id=run.id, name="approval", payload="late", actor="ada")
    from runs.testing import on_commit_callbacks_run

    for _ in range(3):
        for step in Step.objects.filter(run=run, status="queued"):
            with on_commit_callbacks_run():
                engine.execute_step(step_id=step.id, worker="test")
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert _step(run, "act").result["decision"]["payload"] == "late"


def test_a_run_resumed_after_reconciliation_still_waits_for_its_signal():
    from runs.engine import resolve_claim
    from runs.models import Claim

    run = run_inline(branch_wait)
    assert run.status == "needs_reconciliation"
    assert run.step_statuses == {"hold_on": "waiting", "poke": "unresolved"}
    claim = Claim.objects.get(run=run)
    resolve_claim(claim, "succeeded", actor="ann", note="it did answer", result="ok")
    run.refresh_from_db()
    assert run.status == "waiting"
    engine.send_signal(run_id=run.id, name="go", actor="ann")
    from runs.testing import on_commit_callbacks_run

    for step in Step.objects.filter(run=run, status="queued"):
        with on_commit_callbacks_run():
            engine.execute_step(step_id=step.id, worker="test")
    run.refresh_from_db()
    assert run.status == "succeeded"
