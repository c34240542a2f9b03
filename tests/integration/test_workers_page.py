"""The workers page with real workers (docs/operating.md#workers-and-queues): a worker
writes its row when it starts and keeps it fresh from its heartbeat thread while a step
runs in its only process; the page lists it with its host and pid and the attempt it
runs, linked to the run; a worker frozen by SIGSTOP is flagged silent once its last
heartbeat is older than a lease, and one stopped cleanly is gone; messages in a queue no
worker consumes are counted from the broker."""

from __future__ import annotations

import signal
import socket

import pytest
from django.conf import settings
from django.test import override_settings
from kombu.connection import Connection
from kombu.entity import Exchange, Queue

from runs import engine
from runs.models import Attempt, WorkerProcess
from runs.states import AttemptStatus
from tests.support.factories import expire_leases
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.workers, pytest.mark.broker]

# The worker's own timings: an attempt's lease longer than the test, a heartbeat four
# times a second; the page (this process) calls a worker silent after PAGE_LEASE.
WORKER_ENV = {"RUNS_LEASE_SECONDS": "120", "RUNS_WORKER_HEARTBEAT_SECONDS": "0.25"}
PAGE_LEASE = 2


def page_of(client):
    response = client.get("/workers/")
    assert response.status_code == 200
    return response.context["page"], response.content.decode()


def test_the_page_lists_a_real_worker_its_attempt_and_flags_it_silent_when_frozen(
    cluster, operator_client, tmp_path
):
    proc = cluster.worker(**WORKER_ENV)
    row = WorkerProcess.objects.get(pid=proc.popen.pid)
    assert row.host == socket.gethostname() and row.pool_pids == [proc.popen.pid]
    marker, release = tmp_path / "marker", tmp_path / "release"
    run = engine.submit_run(
        workflow="slow-write", input={"marker": str(marker), "hold": 60, "release": str(release)}
    )
    wait_for(
        lambda: marker.with_suffix(".1").exists(), what="the step to start", on_timeout=cluster.logs
    )
    attempt = Attempt.objects.get(run=run, status=AttemptStatus.RUNNING)
    assert attempt.worker == f"{row.host}:{row.pid}"

    with override_settings(RUNS_LEASE_SECONDS=PAGE_LEASE):
        # The step holds the solo worker's only process; its heartbeat goes on.
        beat = WorkerProcess.objects.get(pk=row.pk).heartbeat_at
        wait_for(
            lambda: WorkerProcess.objects.get(pk=row.pk).heartbeat_at > beat,
            what="a heartbeat while the step runs",
        )
        page, html = page_of(operator_client)
        [shown] = page.workers
        assert (shown.name, shown.host, shown.pid) == (row.name, row.host, row.pid)
        assert [a.id for a in shown.attempts] == [attempt.id]
        assert not shown.silent
        assert f'<a href="/runs/{run.id}/">write</a>' in html
        assert f'data-label="host">{row.host}</td>' in html and f">{row.pid}" in html

        proc.signal(signal.SIGSTOP)
        frozen = wait_for(
            lambda: (p := page_of(operator_client)[0]).workers[0].heartbeat_stale and p,
            what="the frozen worker to be flagged silent",
        )
        silent = frozen.workers[0]
        assert silent.silent_since == WorkerProcess.objects.get(pk=row.pk).heartbeat_at
        assert "silent since" in page_of(operator_client)[1]

    # Its attempt's lease runs out unrenewed too (moved on the database's clock).
    expire_leases()
    page, html = page_of(operator_client)
    assert page.workers[0].attempts[0].lease_expired and "not renewed" in html

    release.touch()
    proc.signal(signal.SIGCONT)


def test_a_worker_stopped_cleanly_leaves_no_row(cluster):
    proc = cluster.worker(**WORKER_ENV)
    assert WorkerProcess.objects.filter(pid=proc.popen.pid).count() == 1
    proc.terminate()
    assert proc.wait_exit(timeout=30) == 0, proc.tail()
    assert WorkerProcess.objects.count() == 0


def test_a_worker_killed_outright_keeps_its_row_and_goes_silent(cluster, operator_client):
    proc = cluster.worker(**WORKER_ENV)
    proc.signal(signal.SIGKILL)
    proc.wait_exit(timeout=30)
    with override_settings(RUNS_LEASE_SECONDS=PAGE_LEASE):
        page = wait_for(
            lambda: (p := page_of(operator_client)[0]).silent == 1 and p,
            what="the dead worker to be flagged silent",
        )
    assert [w.pid for w in page.workers] == [proc.popen.pid]


def test_queue_depth_counts_the_messages_no_worker_consumes(cluster, operator_client):
    """No worker runs: three messages wait in the steps' queue (the cluster fixture
    purges them afterwards), none in the recovery queue."""
    name = settings.CELERY_TASK_DEFAULT_QUEUE
    with Connection(settings.CELERY_BROKER_URL) as conn:
        exchange = Exchange(name, type="direct")
        queue = Queue(name, exchange, routing_key=name)
        producer = conn.Producer()
        for n in range(3):
            producer.publish({"n": n}, exchange=exchange, routing_key=name, declare=[queue])
    page, html = page_of(operator_client)
    depths = {q.name: q.messages for q in page.queues}
    assert depths == {name: 3, settings.CELERY_RECOVERY_QUEUE: 0}
    assert page.broker_error == ""
    assert f'data-queue="{name}">3<' in html
