"""A step started in its predecessor's finish transaction (runs/engine/attempts/start.py,
start_successor) belongs to a worker that may die before it runs it: the real worker
is SIGKILLed inside that step, and the step is recovered like any crashed attempt."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from runs import engine
from runs.models import Attempt, Event
from runs.record import history
from runs.states import AttemptStatus, RunStatus, StepStatus
from tests.support.waiting import wait_for

from .helpers import wait_settled

pytestmark = [pytest.mark.workers, pytest.mark.broker]


def test_worker_killed_in_a_step_its_predecessor_started_is_recovered(cluster, tmp_path):
    marker, release = tmp_path / "inside", tmp_path / "release"
    doomed = cluster.worker()  # no fault injection: the direct path is on
    cluster.beat()
    run = engine.submit_run(
        workflow="held-chain",
        input={"marker": str(marker), "hold": 120.0, "release": str(release)},
    )
    wait_for(lambda: Path(f"{marker}.1").exists(), what="hold's attempt 1 in its effect")
    # hold started in ready's finish: one statement wrote both events (with hold's
    # step_queued between them).
    done, started = (
        Event.objects.get(run=run, type=t, step__name=n)
        for t, n in (("step_succeeded", "ready"), ("step_started", "hold"))
    )
    assert (started.seq, started.created_at) == (done.seq + 2, done.created_at)

    doomed.signal(signal.SIGKILL)
    assert doomed.wait_exit() == -signal.SIGKILL
    release.touch()
    cluster.worker()
    run = wait_settled(run, cluster)

    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    attempts = {
        name: list(
            Attempt.objects.filter(run=run, step__name=name)
            .order_by("number")
            .values_list("status", flat=True)
        )
        for name in ("ready", "hold", "conclude")
    }
    assert attempts == {
        "ready": [AttemptStatus.SUCCEEDED],
        "hold": [AttemptStatus.CRASHED, AttemptStatus.SUCCEEDED],
        "conclude": [AttemptStatus.SUCCEEDED],
    }
    assert run.steps.get(name="conclude").status == StepStatus.SUCCEEDED
    assert history.verify_run(run) == []
