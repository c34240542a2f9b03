"""A step's breaker through real worker processes (docs/operating.md#breakers): three
failures trip it and not two; the engine's pause then keeps the next run's step queued
until an operator resumes it, and the step runs once."""

from __future__ import annotations

import pytest

from runs import engine
from runs.models import Attempt, Pause, PauseChange, Step
from runs.principals import ENGINE_BREAKER
from runs.states import RunStatus, StepStatus
from tests.support.waiting import wait_for

from .helpers import wait_settled

pytestmark = [pytest.mark.workers]


def test_three_failures_trip_the_breaker_and_the_next_run_waits_for_a_resume(cluster):
    cluster.worker()
    cluster.beat()

    for _ in range(2):
        run = engine.submit_run(workflow="tripping-charge", input={"fail": True})
        assert wait_settled(run, cluster).status == RunStatus.FAILED, cluster.logs()
    assert not Pause.objects.filter(workflow="tripping-charge").exists()  # not one before

    third = engine.submit_run(workflow="tripping-charge", input={"fail": True})
    assert wait_settled(third, cluster).status == RunStatus.FAILED
    wait_for(
        lambda: Pause.objects.filter(workflow="tripping-charge", step="charge").exists(),
        what="the breaker's pause",
        on_timeout=cluster.logs,
    )
    pause = Pause.objects.get(workflow="tripping-charge")
    assert pause.actor == ENGINE_BREAKER
    assert "3 failed or unknown outcomes of charge" in pause.reason

    healed = engine.submit_run(workflow="tripping-charge", input={"fail": False})
    charge = Step.objects.get(run=healed)
    wait_for(
        lambda: Step.objects.filter(pk=charge.pk, held_at__isnull=False).exists(),
        what="the next run's step to be turned away by the pause",
        on_timeout=cluster.logs,
    )
    charge.refresh_from_db()
    assert (charge.status, charge.attempts) == (StepStatus.QUEUED, 0)

    engine.resume(pause_id=pause.id, actor="ann", reason="the payment host is back")

    assert wait_settled(healed, cluster).status == RunStatus.SUCCEEDED, cluster.logs()
    assert Attempt.objects.filter(step=charge).count() == 1
    assert PauseChange.objects.filter(workflow="tripping-charge").count() == 2  # trip, resume
