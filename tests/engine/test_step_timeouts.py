"""Step timeouts in-process (docs/authoring.md#timeouts): how long an attempt may run,
how it is declared, and that its lease never outlives the bound. The stops in real
worker processes are tested in tests/integration/test_step_timeouts.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runs import engine
from runs.engine.tools import renew_lease, start_attempt, timeout_for
from runs.models import Attempt, Event, Step
from runs.states import AttemptStatus, RunStatus
from runs.testing import run_inline
from runs.workflows import GUARDED, IDEMPOTENT, PURE, TRANSACTIONAL
from runs.workflows.definition import Workflow
from runs.workflows.errors import WorkflowDefinitionError
from tests.support.timeout_workflows import LEASE, TIMEOUT

pytestmark = pytest.mark.django_db


def test_a_hung_step_is_stopped_at_its_timeout_and_retried():
    run = run_inline("hangs-once", input={"ignores_signals": False})

    assert run.status == RunStatus.SUCCEEDED
    first, second = Attempt.objects.filter(run=run).order_by("number")
    assert (first.status, second.status) == (AttemptStatus.FAILED, AttemptStatus.SUCCEEDED)
    assert first.error == "StepTimedOut: the step ran past its timeout of 2 s"
    timed_out = Event.objects.get(run=run, type="attempt_timed_out")
    assert (timed_out.attempt_number, timed_out.payload) == (1, {"step": "hang", "seconds": 2.0})


def _steps(**declared):
    wf = Workflow("timeout-kinds", 1)  # not registered: declared, never run
    for kind in (PURE, TRANSACTIONAL, IDEMPOTENT, GUARDED):
        wf.step(kind=kind, name=f"s_{kind}", after=[], **declared)(lambda ctx: None)
    return wf


def test_each_kind_has_its_own_default_and_the_setting_or_the_step_overrides_it(settings):
    kinds = {name: timeout_for(s) for name, s in _steps().steps.items()}
    assert kinds == {
        "s_pure": 300.0,
        "s_transactional": 60.0,
        "s_idempotent": 300.0,
        "s_guarded": 600.0,
    }
    settings.RUNS_STEP_TIMEOUT_SECONDS = 45
    assert {timeout_for(s) for s in _steps().steps.values()} == {45.0}
    declared = _steps(timeout=timedelta(seconds=7))
    assert {timeout_for(s) for s in declared.steps.values()} == {7.0}


@pytest.mark.parametrize("bad", [0, -1, "30", True, timedelta(0)])
def test_a_timeout_that_is_not_a_positive_duration_is_refused_where_it_is_declared(bad):
    with pytest.raises(WorkflowDefinitionError, match="timeout must be a positive number"):
        _steps(timeout=bad)


def test_the_lease_never_runs_past_the_timeout_and_its_grace(settings):
    settings.RUNS_STEP_TIMEOUT_GRACE_SECONDS = 1.0
    run = engine.submit_run(workflow="hangs-once", input={"ignores_signals": False})
    step = Step.objects.get(run=run)
    started = start_attempt(step_id=step.id, worker="test")
    assert started is not None
    attempt = Attempt.objects.get(pk=started.attempt.id)
    bound = attempt.started_at + timedelta(seconds=TIMEOUT + 1.0)
    assert attempt.lease_expires_at == bound  # not the step's 30-second lease
    assert started.lease_seconds == LEASE

    renew_lease(attempt.id, LEASE, until=started.until)  # a heartbeat does not extend it

    attempt.refresh_from_db()
    assert attempt.lease_expires_at == bound


def test_a_bound_gives_back_another_handlers_alarm_as_it_found_it():
    """pytest-timeout (and anyone else) may hold SIGALRM in the same process: a step
    run in-process must leave its handler and its timer running."""
    import signal

    from runs.engine.tools import bounded

    def theirs(signum, frame):
        raise AssertionError("their alarm fired during the test")

    before = signal.signal(signal.SIGALRM, theirs)
    signal.setitimer(signal.ITIMER_REAL, 60)
    try:
        with bounded(5, kill_after=None, what="a step"):
            pass
        assert signal.getsignal(signal.SIGALRM) is theirs
        assert 55 < signal.getitimer(signal.ITIMER_REAL)[0] <= 60
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_the_run_page_shows_where_an_attempt_was_stopped_and_says_why(viewer_client):
    run = run_inline("hangs-once", input={"ignores_signals": False})

    page = viewer_client.get(f"/runs/{run.id}/").content.decode()

    assert "hang attempt 1: timed out after 2 s at" in page  # the mark's title
    assert "stopped at its timeout" in page  # the legend explains it
    assert "StepTimedOut: the step ran past its timeout of 2 s" in page  # the attempt's error
