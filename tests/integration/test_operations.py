"""Run operations with real workers: a retried step is finished by a worker, a
cancelled run starts nothing new."""

from __future__ import annotations

import pytest
from django.test import Client

from runs import engine
from runs.models import Event, Step
from runs.record import events
from runs.states import RunStatus, StepStatus
from tests.conftest import make_user
from tests.support.waiting import wait_for

from .helpers import wait_settled

pytestmark = pytest.mark.workers


def test_retry_from_the_page_is_finished_by_a_real_worker(cluster):
    cluster.worker()
    run = wait_settled(engine.submit_run(workflow="fork-fail", input={}), cluster)
    assert run.status == RunStatus.FAILED

    operator = Client()
    operator.force_login(make_user("olivia", "operators"))
    response = operator.post(
        f"/runs/{run.id}/retry/", {"step": "doomed_branch"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200

    run = wait_settled(run, cluster, until=(RunStatus.SUCCEEDED, RunStatus.FAILED))
    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    step = Step.objects.get(run=run, key="doomed_branch")
    assert (step.status, step.attempts, step.result) == (StepStatus.SUCCEEDED, 2, "fixed")
    assert Step.objects.get(run=run, key="after_steady").status == StepStatus.SUCCEEDED
    assert Event.objects.get(run=run, type=events.RUN_REOPENED).payload["actor"] == "olivia"


def test_cancelled_run_starts_nothing_on_a_real_worker(cluster):
    run = engine.submit_run(workflow="pure-chain", input={})
    engine.cancel_run(run_id=run.id, actor="ann")
    worker = cluster.worker()
    # The queued step's message is delivered, and refused: the run is not active.
    wait_for(
        lambda: "succeeded in" in worker.output() and "'skipped'" in worker.output(),
        what="the worker to take and drop the message",
        on_timeout=cluster.logs,
    )
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert not Step.objects.filter(run=run, attempts__gt=0).exists()
