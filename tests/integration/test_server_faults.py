"""Server faults in the middle of migrate-records (500 records, batches of 50): the
PostgreSQL server restarting under running workers, and the broker dying and coming
back empty. Each test starts its own server on a free port on 127.0.0.1 (a broker of the
kind the session's is: Redis or RabbitMQ), so the machine's servers are never stopped;
the test database of pytest-django is used only where a test says so.

What is under test is recovery without help: workers reconnect by themselves
(CONN_HEALTH_CHECKS, broker connection retry), an attempt whose worker lost the
database keeps its lease until it expires and the sweeper crashes and requeues it, and
steps whose message the broker lost are republished by the sweeper.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.db.models import Count, Q

from examples.models import TargetRecord
from runs.models import Claim, Run, Step
from runs.states import ClaimStatus, RunStatus
from tests.support.waiting import wait_for

from .helpers import SETTLED, wait_settled
from .servers import manage, session_broker

pytestmark = [pytest.mark.workers, pytest.mark.broker]

INPUT = {"count": 500, "batch_size": 50}
# Migration is well under way (two batches done), with most of it still ahead.
MIGRATED_BEFORE_FAULT = 100
OUTAGE_SECONDS = 2.0


def submit(env: dict[str, str]) -> str:
    """Submit migrate-records through whatever DATABASE_URL / broker `env` names."""
    out = manage(env, "submit_run", "migrate-records", "--input", json.dumps(INPUT))
    return out.strip().splitlines()[-1]


def hold_run_when(
    pg: Any, run_id: str, ready: Callable[[], bool], *, timeout: float = 30
) -> psycopg.Connection[Any]:
    """A connection holding the run's row FOR UPDATE, returned once `ready()` is true
    while it holds it: no item commits meanwhile, so what `ready()` saw is what the
    database has. Between looks the row is released for a moment, and the run goes on."""
    deadline = time.monotonic() + timeout
    conn = psycopg.connect(pg.url.replace("postgres://", "postgresql://"), autocommit=False)
    while True:
        conn.execute("SELECT 1 FROM runs_run WHERE id = %s FOR UPDATE", (run_id,))
        if ready():
            return conn
        conn.rollback()
        if time.monotonic() > deadline:
            conn.close()
            raise AssertionError(f"timed out after {timeout}s waiting while holding {run_id}")
        time.sleep(0.02)


# --- the tests ------------------------------------------------------------------------


def test_postgres_restart_mid_migration_workers_reconnect(
    private_postgres, private_broker, cluster
):
    pg = private_postgres
    # A private broker too (never faulted here): the machine's broker stays untouched,
    # and no other test session shares the queue.
    private = {"DATABASE_URL": pg.url, "CELERY_BROKER_URL": private_broker.url}
    manage(cluster.env(**private), "migrate", "--noinput")
    beat = cluster.beat(**private)
    # Submitted before any worker runs, and the worker not waited for: the gate below is
    # looking before the first item can commit. A worker already running could finish
    # the whole migration while `submit_run` exits, before the gate's first look.
    run_id = submit(cluster.env(**private))
    worker = cluster.worker(wait=False, **private)

    def migrated() -> int:
        row = pg.query("SELECT count(*) FROM examples_targetrecord WHERE run_id = %s", (run_id,))
        return 0 if row is None else int(row[0])

    def status() -> str | None:
        row = pg.query("SELECT status FROM runs_run WHERE id = %s", (run_id,))
        return None if row is None else str(row[0])

    # The crash must come mid-migration, however fast the workers are: the test looks at
    # the count while it holds the run's row FOR UPDATE, which every item's commit waits
    # for (its claim's foreign key share-locks the run), and crashes the server while
    # still holding it once enough rows are in.
    gate = hold_run_when(pg, run_id, lambda: migrated() >= MIGRATED_BEFORE_FAULT)
    assert migrated() < INPUT["count"], "the outage came after the migration had finished"
    pg.stop("immediate")  # a crash: no shutdown checkpoint, every backend killed
    gate.close()
    time.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for a condition
    pg.start()
    # What survived the crash (committed rows); nothing runs again before a sweep.
    assert migrated() < INPUT["count"], "the outage came after the migration had finished"

    wait_for(
        lambda: status() in SETTLED,
        timeout=120,
        what=f"run {run_id} to finish on the private database",
        on_timeout=lambda: cluster.logs() + pg.output(),
    )

    assert status() == RunStatus.SUCCEEDED, cluster.logs() + pg.output()
    total, distinct, low, high = pg.query(
        "SELECT count(*), count(DISTINCT record_id), min(record_id), max(record_id) "
        "FROM examples_targetrecord WHERE run_id = %s",
        (run_id,),
    )
    assert (total, distinct, low, high) == (500, 500, 1, 500)
    (claims,) = pg.query(
        "SELECT count(*) FROM runs_claim WHERE run_id = %s AND item_key IS NOT NULL "
        "AND status = %s",
        (run_id, ClaimStatus.SUCCEEDED),
    )
    assert claims == 500
    # The workers saw the outage and came back by themselves: nobody restarted them.
    assert worker.popen.poll() is None, worker.output()
    assert beat.popen.poll() is None, beat.output()
    assert "OperationalError" in worker.output()


def _migration_whose_broker_dies(broker: Any, cluster: Any) -> tuple[Any, Any, Run, Any, Any]:
    """A 500-record migration on `broker`'s workers, killed with the broker once part of
    it has migrated: the worker, the beat, the run, its rows and when the broker died
    (the database's clock). The broker is down on return; the outage is the caller's."""
    worker = cluster.worker(CELERY_BROKER_URL=broker.url)
    beat = cluster.beat(CELERY_BROKER_URL=broker.url)
    run = Run.objects.get(pk=submit(cluster.env(CELERY_BROKER_URL=broker.url)))
    rows = TargetRecord.objects.filter(run_id=run.id)

    wait_for(
        lambda: rows.count() >= MIGRATED_BEFORE_FAULT,
        timeout=30,
        what=f"{MIGRATED_BEFORE_FAULT} migrated rows",
        on_timeout=cluster.logs,
    )
    broker.kill()
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        (killed_at,) = cursor.fetchone()
    assert rows.count() < INPUT["count"], "the broker died after the migration had finished"
    return worker, beat, run, rows, killed_at


def _every_record_migrated_once(run: Run, rows: Any) -> None:
    assert run.status == RunStatus.SUCCEEDED
    assert rows.count() == 500
    assert rows.values("record_id").distinct().count() == 500
    assert not rows.values("record_id").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert sorted(rows.values_list("record_id", flat=True)) == list(range(1, 501))
    claims = Claim.objects.filter(run=run, item_key__isnull=False)
    assert claims.count() == claims.filter(status=ClaimStatus.SUCCEEDED).count() == 500


def test_broker_killed_and_restarted_empty_sweeper_republishes(private_broker, cluster):
    """Redis with no persistence, or a RabbitMQ node whose data is gone with it (a node
    replaced, a disk lost): every message is lost, those the workers held too."""
    broker = private_broker
    worker, beat, run, rows, killed_at = _migration_whose_broker_dies(broker, cluster)
    time.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for a condition
    # Back on the same port with nothing in it: every message is lost, so the rest of
    # the run can only come from the sweeper republishing queued steps.
    broker.start(empty=True)

    run = wait_settled(run, cluster, timeout=120)

    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    _every_record_migrated_once(run, rows)
    # At least one batch was sent again after the kill: republished by the sweeper
    # (message_due_at; queued_at stays when the step became ready) or requeued from a
    # crashed attempt (queued_at), since the restarted broker held nothing.
    batches = Step.objects.filter(run=run, parent__isnull=False)
    assert batches.filter(Q(queued_at__gt=killed_at) | Q(message_due_at__gt=killed_at)).exists()
    assert worker.popen.poll() is None, worker.output()
    assert beat.popen.poll() is None, beat.output()


@pytest.mark.skipif(
    session_broker() != "rabbitmq",
    reason="about RabbitMQ's restart with its data: the private Redis keeps nothing across "
    "a restart (no persistence), which the empty restart above covers",
)
def test_rabbitmq_killed_and_restarted_with_its_messages_redelivers_safely(private_broker, cluster):
    """A RabbitMQ node killed and started again keeps its durable queues and persistent
    messages, and puts back every message its consumers had not acknowledged: the batch
    a worker was running when the node died comes again, to run against the claims that
    batch already took."""
    broker = private_broker
    worker, beat, run, rows, _ = _migration_whose_broker_dies(broker, cluster)
    time.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for a condition
    broker.start(empty=False)

    run = wait_settled(run, cluster, timeout=120)

    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    _every_record_migrated_once(run, rows)
    assert worker.popen.poll() is None, worker.output()
    assert beat.popen.poll() is None, beat.output()
    # The worker came back to the restarted node by itself.
    assert worker.output().count(f"Connected to amqp://guest:**@127.0.0.1:{broker.port}//") >= 2
