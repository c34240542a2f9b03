"""A pause through a real worker and beat (docs/operating.md#pause-and-resume): 1,000
deliveries of a paused step's message and the sweeps of a running beat start nothing;
the resume starts it once, with one effect."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.functions import Now

from examples.models import Merge
from runs import engine
from runs.engine.tools import publish
from runs.models import Attempt, Run, Step
from runs.states import AttemptStatus, RunStatus, StepStatus
from tests.support.waiting import wait_for

from .helpers import wait_settled

pytestmark = [pytest.mark.workers, pytest.mark.soak]


def test_a_paused_step_is_not_started_by_1000_duplicate_deliveries_plus_sweeps(cluster):
    worker = cluster.worker()
    cluster.beat()  # sweeps every 0.5 s, republishing steps queued for more than 3 s
    pause = engine.pause(workflow="merge-change", step="merge", actor="ann", reason="host down")
    run = engine.submit_run(workflow="merge-change", input={"change_id": 9})
    merge = Step.objects.get(run=run, name="merge")

    refused = f"step merge of run {run.id} is paused"

    publish.publish_now([merge.id] * 1000)
    # A run submitted after them: its messages are behind the 1,000 in the queue, so when
    # it has finished the worker has taken every one of them.
    behind = engine.submit_run(workflow="pure-chain", input={})
    assert wait_settled(behind, cluster).status == RunStatus.SUCCEEDED
    # Sweeps that ran with the step queued for longer than their republish bound (3 s).
    wait_for(
        lambda: Step.objects.filter(
            pk=merge.id, queued_at__lt=Now() - timedelta(seconds=4)
        ).exists(),
        what="the step to be older than the republish bound, on the database's clock",
    )
    swept = worker.output().count("Task runs.sweep[")
    wait_for(
        lambda: worker.output().count("Task runs.sweep[") >= swept + 4,
        what="two more sweeps (each logged received and succeeded)",
    )

    merge.refresh_from_db()
    assert (merge.status, merge.attempts) == (StepStatus.QUEUED, 0)
    assert Attempt.objects.filter(run=run).count() == 0
    assert Merge.objects.filter(run_id=run.id).count() == 0
    # The submit's message and the 1,000, each refused; not one more from the sweeps.
    assert worker.output().count(refused) == 1001

    engine.resume(pause_id=pause.id, actor="bob", reason="host is back")

    run = wait_settled(run, cluster)
    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    assert list(Attempt.objects.filter(run=run).values_list("status", flat=True)) == [
        AttemptStatus.SUCCEEDED
    ]
    assert Merge.objects.filter(run_id=run.id).count() == 1
    assert Run.objects.get(pk=run.id).steps.get().attempts == 1
