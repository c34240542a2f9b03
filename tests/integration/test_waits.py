"""Durable waits against real worker and beat processes: signals before and
after the wait is reached, timeouts woken by the sweeper on the database's clock, a
worker killed while its run waits, and two beats (two sweepers) waking a timer once."""

from __future__ import annotations

import signal

import pytest
from django.db import connection

from runs import engine
from runs.engine.tools import publish
from runs.models import Event, Run, Step
from runs.states import RunStatus, StepStatus
from tests.support.waiting import wait_for

from .helpers import wait_settled

pytestmark = pytest.mark.workers


def _step(run: Run, name: str) -> Step:
    return Step.objects.get(run=run, name=name, parent__isnull=True)


def _waiting(run: Run, name: str) -> bool:
    run.refresh_from_db()
    return run.status == RunStatus.WAITING and _step(run, name).status == StepStatus.WAITING


def test_signal_after_the_wait_is_reached_completes_the_run(cluster):
    cluster.worker()
    run = engine.submit_run(workflow="queued-signals", input={})
    wait_for(lambda: _waiting(run, "first_tick"), what="the first wait", on_timeout=cluster.logs)
    engine.send_signal(run_id=run.id, name="tick", payload=1, actor="ada")
    wait_for(lambda: _waiting(run, "second_tick"), what="the second wait", on_timeout=cluster.logs)
    engine.send_signal(run_id=run.id, name="tick", payload=2, actor="bob")
    run = wait_settled(run, cluster)
    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    assert _step(run, "first_tick").result == {"payload": 1, "actor": "ada", "timed_out": False}
    assert _step(run, "second_tick").result == {"payload": 2, "actor": "bob", "timed_out": False}
    assert Event.objects.filter(run=run, type="run_waiting").count() == 2
    assert Event.objects.filter(run=run, type="run_woken").count() == 2


def test_signal_before_the_wait_is_kept_and_the_run_never_waits(cluster):
    run = engine.submit_run(workflow="wait-approval", input={"order": 5})
    engine.send_signal(run_id=run.id, name="approval", payload={"ok": True}, actor="ada")
    cluster.worker()
    run = wait_settled(run, cluster)
    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    assert run.result["act"]["decision"]["payload"] == {"ok": True}
    assert not Event.objects.filter(run=run, type="step_waiting").exists()


def test_timeouts_are_woken_by_the_sweeper(cluster):
    cluster.worker()
    cluster.beat()
    failing = engine.submit_run(workflow="wait-approval", input={"order": 1})
    going_on = engine.submit_run(workflow="wait-continue", input={})
    failing = wait_settled(failing, cluster)
    going_on = wait_settled(going_on, cluster)
    assert failing.status == RunStatus.FAILED, cluster.logs()
    assert "before its timeout" in _step(failing, "approval").error
    assert going_on.status == RunStatus.SUCCEEDED, cluster.logs()
    assert going_on.result == {"after_nudge": {"timed_out": True}}
    # the timeout was measured on the database's clock, from when the wait was reached
    approval = _step(failing, "approval")
    assert approval.finished_at >= approval.wake_at


def test_worker_killed_while_the_run_waits_then_the_signal_completes_it(cluster):
    first = cluster.worker()
    run = engine.submit_run(workflow="queued-signals", input={})
    wait_for(lambda: _waiting(run, "first_tick"), what="the wait", on_timeout=cluster.logs)
    first.signal(signal.SIGKILL)
    assert first.wait_exit() == -signal.SIGKILL
    # Nothing is held by the dead worker: no attempt, the run's state is in the rows.
    assert _step(run, "first_tick").attempts == 0
    engine.send_signal(run_id=run.id, name="tick", payload="one", actor="ada")
    engine.send_signal(run_id=run.id, name="tick", payload="two", actor="ada")
    cluster.worker()
    run = wait_settled(run, cluster)
    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    assert _step(run, "second_tick").result["payload"] == "two"


def test_two_beats_wake_each_timer_once(cluster):
    cluster.worker()
    cluster.worker()
    runs = [engine.submit_run(workflow="sleepy", input={"seconds": 2.0}) for _ in range(10)]
    cluster.beat()
    cluster.beat()
    for run in runs:
        run = wait_settled(run, cluster)
        assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    for run in runs:
        woken = Event.objects.filter(run=run, type="step_queued", payload__reason="timer due")
        assert woken.count() == 1
        assert Event.objects.filter(run=run, type="step_succeeded").count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_sweepers_wake_the_same_timers_once(tmp_path):
    """Two sweeper processes (`manage.py recover`, what beat's task runs), started
    together over the same 200 due timers: every timer is woken by exactly one."""
    import subprocess
    import sys
    from unittest import mock

    from tests.integration.harness import Cluster
    from tests.support.places import ROOT

    runs = [engine.submit_run(workflow="sleepy", input={"seconds": 3600.0}) for _ in range(200)]
    with mock.patch.object(publish, "send"):
        for run in runs:
            engine.execute_step(step_id=_step(run, "nap").id, worker="test")
    assert Step.objects.filter(status=StepStatus.WAITING).count() == 200
    with connection.cursor() as cursor:  # the hour has passed, on the database's clock
        cursor.execute("UPDATE runs_step SET wake_at = now() WHERE status = 'waiting'")
    env = Cluster(tmp_path).env()
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "recover"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    assert Step.objects.filter(status=StepStatus.QUEUED, name="nap").count() == 200
    woken = Event.objects.filter(type="step_queued", payload__reason="timer due")
    assert woken.count() == 200
    assert woken.values("run_id").distinct().count() == 200  # one wake-up per timer
    # both reports together account for every timer exactly once
    counts = [int(out.split(" woken timer")[0].rsplit(" ", 1)[-1]) for out in outputs]
    assert sum(counts) == 200, outputs
