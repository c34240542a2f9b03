"""A backlog soak sized for CI (docs/performance.md; bench/backlog.py is the full-size one): a few
hundred map-batch steps of migrate-records queued on two real workers, with a beat
sweeping every 0.5 s and republishing what waited 3 s (the harness's timings, the
sweeper's back-off on), and a bulk cancel of one of the runs confirmed while the
backlog waits.

Sampled while it drains, each sample in one REPEATABLE READ snapshot: what the workers
page reads (runs.web.workers.workers_page), what /metrics reads (DatabaseCollector) and
the truth by this test's own SQL. Bounds come from facts, not from timing:

- the bulk cancel starts after at most AHEAD step messages per worker (a control
  message is served ahead of the step backlog, tests/integration/test_control_queue.py);
- the step queue never holds more than 1.1 x the messages that may be there: the queued
  steps, the cancelled run's batches that never started (withdrawn to pending by the
  cancel, their messages stay in the broker until a worker takes each, as a no-op: a
  bound, since those rows stay pending for ever) and
  one message per worker taken and not acknowledged yet (acks_late, prefetch 1);
  anything above is a duplicate, a republish of a message that was still there;
- the page and the gauge count exactly the truth's queued steps (the same snapshot)
  and their oldest wait is within 10 % of the truth's; no step of the cancelled run is
  counted once it is cancelled;
- every record of every run that succeeded migrated once, none of the cancelled one
  twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count
from django.http import QueryDict

from examples.models import TargetRecord
from runs import engine
from runs.batches import service
from runs.models import Attempt, Batch, Run, Step
from runs.ops.metrics import DatabaseCollector
from runs.states import RUN_ACTIVE, BatchStatus, RunStatus, StepStatus
from runs.web.workers import workers_page
from tests.support.waiting import wait_for

pytestmark = [
    pytest.mark.workers,
    pytest.mark.soak,
    pytest.mark.broker,
    pytest.mark.timeout(240),
]

RUNS = 4
RECORDS = 600
BATCH = 5  # 120 map-batch steps a run, 480 in all
WORKERS = 2
# Steps that the backlog holds when the cancel is confirmed, at least: all 480 are
# queued before the workers start, and the cancel comes once three have started.
BACKLOG = 300
# Step messages a worker may take ahead of a control message (test_control_queue.py:
# one on Redis; RabbitMQ shares the prefetch between queues in no promised order).
AHEAD = 8

TRUTH = """
SELECT clock_timestamp(),
       count(*) FILTER (WHERE s.status = 'queued' AND r.status = ANY(%(active)s)),
       min(s.queued_at) FILTER (WHERE s.status = 'queued' AND r.status = ANY(%(active)s)),
       count(*) FILTER (WHERE NOT r.status = ANY(%(active)s))
FROM runs_step s JOIN runs_run r ON r.id = s.run_id
WHERE s.compensates = ''
  -- and a stopped run's map batches withdrawn to pending (state/stopped.py): created
  -- queued, so their messages may still be in the broker
  AND (s.status = 'queued' OR (s.status = 'pending' AND s.parent_id IS NOT NULL))
"""


def step_of(run: Run, key: str) -> int:
    return Step.objects.get(run=run, key=key).id


@dataclass
class Sample:
    messages: int | None
    queued: int
    leftovers: int
    oldest: float | None
    page_waiting: int
    page_oldest: float | None
    metric_queued: int
    metric_oldest: float


def sample() -> Sample:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            page = workers_page()
            gauges = {m.name: m.samples[0].value for m in DatabaseCollector().collect()}
            cursor.execute(TRUTH, {"active": [str(s) for s in RUN_ACTIVE]})
            now, queued, ready_at, leftovers = cursor.fetchone()
    depths = {q.name: q.messages for q in page.queues}
    wait = page.oldest_wait
    return Sample(
        messages=depths.get(settings.CELERY_TASK_DEFAULT_QUEUE),
        queued=queued,
        leftovers=leftovers,
        oldest=(now - ready_at).total_seconds() if ready_at else None,
        page_waiting=page.waiting,
        page_oldest=wait.total_seconds() if wait is not None else None,
        metric_queued=int(gauges["durable_runs_queued_steps"]),
        metric_oldest=float(gauges["durable_runs_oldest_queued_step_age_seconds"]),
    )


def test_a_bulk_cancel_and_the_figures_during_a_backlog(cluster):
    began = time.monotonic()
    runs = []
    for n in range(RUNS):
        if n == RUNS - 1:
            with connection.cursor() as cursor:
                cursor.execute("SELECT now()")
                cancel_from = cursor.fetchone()[0].isoformat()
            time.sleep(0.01)
        runs.append(
            engine.submit_run(
                workflow="migrate-records", input={"count": RECORDS, "batch_size": BATCH}
            )
        )
    cancelled = runs[-1]
    # Each run's list of records made here, so its map's 120 messages are queued before a
    # worker starts: the backlog does not depend on how fast the workers drain it.
    for run in runs:
        assert engine.execute_step(step_id=step_of(run, "list_records"), worker="t")
    batches = Step.objects.filter(run__in=runs, key__startswith="migrate[")
    assert batches.filter(status=StepStatus.QUEUED).count() == RUNS * RECORDS // BATCH
    cluster.beat()  # ready before the workers start taking the backlog
    for _ in range(WORKERS):
        cluster.worker(wait=False)
    attempts_started = Attempt.objects.filter(step__in=batches)
    wait_for(
        lambda: attempts_started.count() >= 3,
        what="the workers to work through the backlog",
        on_timeout=cluster.logs,
    )
    queued = batches.filter(status=StepStatus.QUEUED).count()
    assert queued >= BACKLOG, f"only {queued} steps queued: the workers drained it first"

    params = QueryDict(mutable=True)
    params.update({"workflow": "migrate-records", "created_after": cancel_from})
    batch = service.create_batch(
        operation="cancel", params=params, actor="ann", reason="stop the last one"
    )
    assert batch.total == 1

    samples: list[Sample] = []
    cancelled_seen = False

    def drained() -> bool:
        nonlocal cancelled_seen
        samples.append(sample())
        if not cancelled_seen:
            cancelled_seen = Run.objects.filter(
                pk=cancelled.pk, status=RunStatus.CANCELLED
            ).exists()
            if cancelled_seen:
                samples.append(sample())  # the first sample after the cancel committed
        time.sleep(0.3)
        return not Run.objects.filter(pk__in=[r.pk for r in runs], status__in=RUN_ACTIVE).exists()

    wait_for(drained, timeout=150, what="the backlog to drain", on_timeout=cluster.logs)
    samples.append(sample())

    # The cancel started ahead of the backlog, and finished with most of it still there.
    batch = Batch.objects.get(pk=batch.pk)
    assert batch.status == BatchStatus.SUCCEEDED and (batch.applied, batch.failed) == (1, 0)
    attempts = Attempt.objects.filter(run__in=runs[:-1])
    ahead = attempts.filter(
        started_at__gte=batch.created_at, started_at__lt=batch.started_at
    ).count()
    assert ahead <= AHEAD * WORKERS, f"{ahead} step message(s) served ahead of the batch's"
    waiting_then = (
        batches.exclude(run=cancelled).count()
        - attempts.filter(
            step__key__startswith="migrate[", started_at__lt=batch.finished_at
        ).count()
    )
    assert waiting_then >= queued // 2, (waiting_then, queued)
    # Its batches that never started went back to pending with the cancel; none is queued.
    assert not batches.filter(run=cancelled, status=StepStatus.QUEUED).exists()
    left_behind = batches.filter(run=cancelled, status=StepStatus.PENDING).count()
    assert left_behind > 0

    # The figures, sample by sample.
    assert len(samples) >= 3  # sampled while it drained
    for s in samples:
        assert s.messages is not None
        assert s.messages <= 1.1 * (s.queued + s.leftovers) + WORKERS, s
        assert s.page_waiting == s.metric_queued == s.queued, s
        if s.oldest is not None and s.oldest >= 1.0:
            assert s.page_oldest is not None, s
            assert abs(s.page_oldest - s.oldest) <= 0.1 * s.oldest, s
            assert abs(s.metric_oldest - s.oldest) <= 0.1 * s.oldest, s
    # After the cancel, its queued steps are no longer counted by the page or the gauge.
    after = [s for s in samples if s.leftovers]
    assert after and all(s.page_waiting == s.queued for s in after)
    assert after[0].leftovers == left_behind  # a succeeded run leaves no queued step

    # Nothing migrated twice; nothing lost of what succeeded.
    assert not (
        TargetRecord.objects.values("run_id", "record_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .exists()
    )
    for run in runs[:-1]:
        run.refresh_from_db()
        assert run.status == RunStatus.SUCCEEDED, cluster.logs()
        assert TargetRecord.objects.filter(run_id=run.id).count() == RECORDS
    assert Run.objects.get(pk=cancelled.pk).status == RunStatus.CANCELLED
    assert time.monotonic() - began < 120
