"""A worker's row (runs/ops/heartbeat.py) in-process: written at start, refreshed by its
heartbeat thread, deleted at stop; an older process of the same node name never takes
the row back from its successor; rows silent past RUNS_WORKER_FORGET_SECONDS go when a
worker starts. Real workers doing this are in tests/integration/test_workers_page.py."""

from __future__ import annotations

from django.db import connection
from django.test import override_settings

from runs.models import WorkerProcess
from runs.ops.heartbeat import Heartbeat, Identity
from tests.support.waiting import wait_for


def heartbeat(name: str = "w1@h", pid: int = 10, pids: list[int] | None = None) -> Heartbeat:
    return Heartbeat(
        Identity(name=name, host="h", pid=pid, concurrency=2),
        pool_pids=lambda: pids or [pid],
        interval=0.05,
    )


def test_the_row_is_written_refreshed_and_removed(transactional_db):
    beat = heartbeat(pids=[11, 12])
    beat.start()
    try:
        row = WorkerProcess.objects.get()
        assert (row.name, row.host, row.pid, row.pool_pids, row.concurrency) == (
            "w1@h", "h", 10, [11, 12], 2,
        )  # fmt: skip
        assert row.started_at == beat.started
        wait_for(
            lambda: WorkerProcess.objects.get().heartbeat_at > row.heartbeat_at,
            what="a heartbeat",
        )
        assert WorkerProcess.objects.get().started_at == row.started_at
    finally:
        beat.stop()
    assert WorkerProcess.objects.count() == 0


def test_an_older_process_of_the_same_name_does_not_take_the_row_back(transactional_db):
    old, new = heartbeat(pid=10), heartbeat(pid=20)
    old.start()
    old._stop.set()  # frozen: its thread beats no more
    new.start()
    try:
        old.beat()  # continued after its successor started
        assert WorkerProcess.objects.get().pid == 20
        old.stop()  # and its clean stop leaves the successor's row
        assert WorkerProcess.objects.get().pid == 20
    finally:
        new.stop()
    assert WorkerProcess.objects.count() == 0


def test_workers_silent_past_the_forget_bound_go_when_a_worker_starts(transactional_db):
    gone = WorkerProcess.objects.create(name="gone@h", host="h", pid=1)
    kept = WorkerProcess.objects.create(name="kept@h", host="h", pid=2)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_workerprocess SET heartbeat_at = now() - interval '2 hours' WHERE id = %s",
            [gone.id],
        )
    beat = heartbeat()
    with override_settings(RUNS_WORKER_FORGET_SECONDS=3600):
        beat.start()
    try:
        assert sorted(WorkerProcess.objects.values_list("name", flat=True)) == ["kept@h", "w1@h"]
    finally:
        beat.stop()
    assert list(WorkerProcess.objects.values_list("id", flat=True)) == [kept.id]
