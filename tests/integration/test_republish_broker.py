"""The sweeper's republish is idempotent on the real broker (docs/operating.md#what-runs-
where-and-why): a queued step whose message is still in the steps' queue is not sent
again, however long it has waited; a message the broker lost is sent once, and not
again while that one is outstanding. No worker runs: the messages stay where the broker
keeps them, and the depths are read as the sweeper reads them (engine.queue_depths).

Runs on Redis in the whole suite and again on RabbitMQ in CI (marker `broker`): the
depth that decides the back-off is each broker's own count."""

from __future__ import annotations

import pytest
from celery.signals import before_task_publish
from django.conf import settings
from django.test import override_settings
from kombu import Connection, Queue

from config.celery import app
from runs import engine
from runs.engine.tools import republish_stale
from runs.models import Step
from runs.states import StepStatus
from tests.support.factories import earlier
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.servers, pytest.mark.broker]

RUNS = 12
BOUND = 60  # RUNS_REPUBLISH_AFTER_SECONDS: the steps are made older than it


@pytest.fixture
def sent():
    """The step ids this process publishes, in order."""
    ids: list[int] = []

    def record(sender=None, body=None, **_):
        if sender == "runs.execute_step":
            args, _kwargs, _embed = body  # the message protocol 2 body
            ids.append(args[0])

    before_task_publish.connect(record, weak=False)
    yield ids
    before_task_publish.disconnect(record)


def depth() -> int:
    name = settings.CELERY_TASK_DEFAULT_QUEUE
    depths, error = engine.queue_depths([name])
    assert depths is not None, error
    return depths[name]


@override_settings(RUNS_REPUBLISH_AFTER_SECONDS=BOUND, RUNS_REPUBLISH_BACKOFF=True)
def test_no_second_message_while_one_is_outstanding_and_a_lost_one_is_sent_once(cluster, sent):
    for _ in range(RUNS):
        engine.submit_run(workflow="pure-chain", input={})
    steps = list(Step.objects.filter(status=StepStatus.QUEUED).values_list("id", flat=True))
    assert len(steps) == len(sent) == RUNS
    wait_for(lambda: depth() == RUNS, what="the submissions' messages in the queue")

    # Long past the bound, every message still in the queue: nothing is sent.
    earlier(steps, BOUND * 10)
    waiting_since = dict(Step.objects.filter(pk__in=steps).values_list("id", "queued_at"))
    assert republish_stale() == []
    assert depth() == RUNS and len(sent) == RUNS

    # The broker loses them all (restarted empty): each step is sent once more.
    app.control.purge()
    wait_for(lambda: depth() == 0, what="the queue to be empty")
    assert sorted(republish_stale()) == sorted(steps)
    assert sorted(sent[RUNS:]) == sorted(steps)
    wait_for(lambda: depth() == RUNS, what="the republished messages in the queue")

    # A sweep right after, and one long after while they are still there: nothing more.
    assert republish_stale() == []
    earlier(steps, BOUND * 10)
    assert republish_stale() == []
    assert len(sent) == 2 * RUNS
    assert depth() == RUNS
    # queued_at still says since when each step waits (moved back twice by the test's
    # clock), not when it was last sent.
    now_since = dict(Step.objects.filter(pk__in=steps).values_list("id", "queued_at"))
    assert all((waiting_since[i] - now_since[i]).total_seconds() == BOUND * 10 for i in steps)


@override_settings(RUNS_REPUBLISH_AFTER_SECONDS=BOUND, RUNS_REPUBLISH_BACKOFF=True)
def test_a_partly_lost_queue_gets_back_what_it_lost_and_no_more(cluster, sent):
    """Half the messages lost: the sweeper cannot tell which, so it sends the oldest,
    as many as the queue lacks (over two sweeps when a sweep's limit is smaller), then
    nothing. Before, each sweep sent its whole limit while the queue was short by even
    one message (a worker's prefetched ones are not in the depth): up to 200 duplicates
    at the end of a deep queue, outliving the steps they were for."""
    for _ in range(RUNS):
        engine.submit_run(workflow="pure-chain", input={})
    steps = list(Step.objects.filter(status=StepStatus.QUEUED).values_list("id", flat=True))
    wait_for(lambda: depth() == RUNS, what="the submissions' messages in the queue")
    lost = RUNS // 2
    name = settings.CELERY_TASK_DEFAULT_QUEUE
    with Connection(settings.CELERY_BROKER_URL) as conn:  # taken off and dropped
        queue = Queue(name, channel=conn.channel())
        for _ in range(lost):
            message = queue.get(no_ack=False)
            assert message is not None
            message.ack()
    wait_for(lambda: depth() == RUNS - lost, what="half the messages gone")
    earlier(steps, BOUND * 10)

    limit = lost - 2
    first = republish_stale(limit=limit)
    assert len(first) == limit
    wait_for(lambda: depth() == RUNS - lost + limit, what="the first sweep's messages")
    second = republish_stale(limit=limit)  # the queue still lacks two
    assert len(second) == 2 and not set(first) & set(second)
    wait_for(lambda: depth() == RUNS, what="the second sweep's messages")
    # A message per waiting step is there again: however long they wait, nothing more.
    earlier(steps, BOUND * 10)
    assert republish_stale(limit=limit) == []
    assert len(sent) == RUNS + lost
    assert depth() == RUNS
