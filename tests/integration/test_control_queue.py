"""Operator work never queues behind step work (docs/operating.md#what-runs-where-and-why),
with a real worker on the real broker: a backlog of step messages, each holding the
worker's only process for HOLD seconds, fills the step queue; a bulk cancel of those
runs is confirmed while the backlog waits, and its message (`runs.process_batch`, on the
control queue) starts after at most a few of them, not after all of them.

Measured on the database's clock, from the attempts' and the batch's own timestamps: how
many steps started between the batch's creation and its start (the step messages served
ahead of it), and how many never started before it finished (still queued). With the
batch's message on the step queue it waits behind the whole backlog, RUNS * HOLD seconds,
and both assertions fail."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from runs import engine
from runs.batches import service
from runs.models import Attempt, Batch, Run
from runs.states import BatchStatus, RunStatus
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.workers, pytest.mark.broker]

# One message per run, each holding the solo worker HOLD seconds: a backlog of about
# 20 s, which the batch must not wait for. RUNS stays within one of the service's chunks,
# so the batch is one message: nothing but its own work runs between its start and end.
RUNS = 100
HOLD = 0.2
assert RUNS <= service.CHUNK
# Step messages a worker may take ahead of a control message published while it runs a
# step. On Redis it is at most one (the transport alternates between the worker's queues:
# the one a message just came from is asked last next time); RabbitMQ shares the worker's
# prefetch between its queues' consumers in no promised order, so allow a few more.
AHEAD = 8
# The submissions' messages are older than the harness's republish bound (3 s) by the
# time the worker's start sweeps: a bound longer than the test keeps one message per step.
ENV = {"RUNS_REPUBLISH_AFTER_SECONDS": "300"}


def test_a_bulk_cancel_starts_ahead_of_the_step_backlog(cluster, tmp_path):
    for n in range(RUNS):
        engine.submit_run(
            workflow="slow-write", input={"marker": str(tmp_path / f"m{n}"), "hold": HOLD}
        )
    runs = Run.objects.filter(workflow="slow-write")
    attempts = Attempt.objects.filter(run__in=runs)
    cluster.worker(**ENV)
    # The worker is working through the backlog.
    wait_for(lambda: attempts.count() >= 3, what="steps to start", on_timeout=cluster.logs)

    batch = service.create_batch(
        operation="cancel",
        params=QueryDict("workflow=slow-write"),
        actor="ann",
        reason="stop the backlog",
    )
    wait_for(
        lambda: Batch.objects.get(pk=batch.id).status == BatchStatus.SUCCEEDED,
        timeout=RUNS * HOLD * 3,
        what="the batch to finish",
        on_timeout=cluster.logs,
    )
    batch.refresh_from_db()
    assert batch.started_at is not None and batch.finished_at is not None

    before = attempts.filter(started_at__lt=batch.created_at).count()
    ahead = attempts.filter(
        started_at__gte=batch.created_at, started_at__lt=batch.started_at
    ).count()
    still_queued = RUNS - attempts.filter(started_at__lt=batch.finished_at).count()
    assert ahead <= AHEAD, f"{ahead} step message(s) served ahead of the batch's"
    # The backlog was still there when the batch finished: it did not wait for it.
    assert still_queued >= RUNS - before - AHEAD, still_queued
    assert still_queued >= RUNS // 2, still_queued

    # It did its work: every run still active at its creation cancelled, the rest
    # (already finished) refused, and no step of them started after it finished.
    assert (batch.total, batch.done, batch.failed) == (RUNS, RUNS, 0)
    assert batch.applied == runs.filter(status=RunStatus.CANCELLED).count() >= still_queued
    assert batch.applied + batch.refused == RUNS
    assert not attempts.filter(started_at__gt=batch.finished_at).exists()
