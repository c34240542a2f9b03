"""What send_signal() accepts: a signal that no wait of the run can consume any more is
refused (it would be kept forever while its sender believes it arrived)."""

from __future__ import annotations

import pytest

from runs import engine
from runs.models import Run, Signal, Step
from runs.states import RunStatus
from runs.testing import run_inline

pytestmark = pytest.mark.django_db


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def test_a_signal_whose_wait_timed_out_is_refused():
    run = run_inline("two-waits")  # ping's timeout is skipped: it went on without it
    assert step_of(run, "ping").result == {"timed_out": True}
    assert run.status == RunStatus.WAITING  # pong still waits

    with pytest.raises(engine.WaitFinished) as refused:
        engine.send_signal(run_id=run.id, name="ping", payload={"late": True}, actor="ann")

    assert "ping" in str(refused.value) and "timed out" in str(refused.value)
    assert not Signal.objects.filter(run=run, name="ping").exists()
