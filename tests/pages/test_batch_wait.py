"""A pending batch's page says why it has not started (docs/operating.md#bulk-
operations): no worker reports itself within a lease, how many messages the control
queue holds as the broker counts them, or that the broker cannot be read. A running
batch says none of it."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from celery import current_app
from django.conf import settings
from django.db import connection
from django.http import QueryDict
from django.test import override_settings

from runs.batches import service
from runs.models import Batch, WorkerProcess
from tests.support.batches import active_runs

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "batch-live"}


def pending_batch() -> Batch:
    """A batch no worker took up. Under the test's transaction its own message is not
    sent (it goes after commit)."""
    active_runs(1)
    return service.create_batch(operation="cancel", params=QueryDict(), actor="ann", reason="r")


def reason(client, batch: Batch) -> str:
    """The notice of the live part (what the page polls every second)."""
    page = html.unescape(client.get(f"/runs/batches/{batch.id}/", **HTMX).content.decode())
    assert 'hx-trigger="every 1s"' in page
    if 'id="batch-wait"' not in page:
        return ""
    notice = page.split('id="batch-wait"', 1)[1].split("</p>", 1)[0]
    return " ".join(notice.split(">", 1)[1].split())


def a_worker(stale: bool = False) -> None:
    worker = WorkerProcess.objects.create(name="w1@host", host="host", pid=42, pool_pids=[42])
    if stale:
        lease = timedelta(seconds=float(settings.RUNS_LEASE_SECONDS) + 1)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE runs_workerprocess SET heartbeat_at = now() - %s WHERE id = %s",
                [lease, worker.id],
            )


@pytest.mark.parametrize("stale", [None, True], ids=["no worker row", "stale heartbeat"])
def test_no_worker_running_says_to_start_one(operator_client, stale):
    if stale:
        a_worker(stale=True)
    batch = pending_batch()
    text = reason(operator_client, batch)
    assert text == (
        "Not started yet. No worker is running: start one (<code>make up</code> starts one;"
        " docs/operating.md, “Processes”)."
    )


@pytest.mark.broker
def test_a_running_worker_says_how_many_messages_the_control_queue_holds(operator_client):
    """The session's real broker: its control queue emptied, then three messages put
    there that no worker takes (no worker runs in this test)."""
    a_worker()
    batch = pending_batch()
    current_app.control.purge()
    try:
        idle = "Not started yet. Waiting for a free worker to take it."
        assert reason(operator_client, batch) == idle
        for _ in range(3):
            current_app.send_task("runs.process_batch", args=(batch.id,))
        assert reason(operator_client, batch) == (
            "Not started yet. Waiting for a free worker: the control queue holds 3 messages,"
            " counting its own."
        )
    finally:
        current_app.control.purge()


def test_a_broker_that_cannot_be_read_is_said_with_its_error(operator_client):
    a_worker()
    batch = pending_batch()
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
        text = reason(operator_client, batch)
    assert text.startswith("Not started yet. The broker could not be read (")
    assert "Connection" in text or "refused" in text
    assert text.endswith(
        "so its queue is unknown. The batch starts once a worker takes its message."
    )


def test_a_running_batch_says_no_reason(operator_client):
    batch = pending_batch()
    service.process(batch.id, limit=0)  # taken up: running, nothing done yet
    batch.refresh_from_db()
    assert batch.status == "running"
    assert reason(operator_client, batch) == ""
