"""A pending batch's page in a real browser says why it waits, in a status read by its
name, and the reason goes once a worker takes the batch up (the page polls itself);
at 1280 and 390 px."""

from __future__ import annotations

import pytest
from celery import current_app
from django.http import QueryDict
from playwright.sync_api import expect

from runs.batches import service
from runs.models import WorkerProcess
from tests.conftest import PASSWORD, make_user
from tests.support.batches import active_runs

pytestmark = [pytest.mark.browser, pytest.mark.broker]


def test_a_pending_batch_says_why_it_waits_until_a_worker_takes_it(browser, transactional_db):
    make_user("olivia", "operators")
    current_app.control.purge()  # this session's queues: what earlier tests left
    try:
        WorkerProcess.objects.create(name="w1@host-a", host="host-a", pid=4242, pool_pids=[4242])
        active_runs(2)
        # Committed: its message goes to the control queue, where no worker takes it.
        batch = service.create_batch(
            operation="cancel", params=QueryDict(), actor="olivia", reason="wrong input"
        )

        browser.login("olivia", PASSWORD)
        page = browser.goto(f"/runs/batches/{batch.id}/")
        why = page.get_by_role("status", name="Why the batch waits")
        expect(why).to_have_text(
            "Not started yet. Waiting for a free worker: the control queue holds 1 message,"
            " counting its own."
        )
        expect(page.get_by_role("progressbar", name="0 of 2 runs done")).to_be_visible()
        browser.check_accessibility("a pending batch")
        browser.screenshot("batch-waiting")
        browser.screenshot("batch-waiting", width=390)

        service.process(batch.id)  # a worker took it up and did it all
        expect(page.get_by_role("progressbar", name="2 of 2 runs done")).to_be_visible()
        expect(why).to_have_count(0)
    finally:
        current_app.control.purge()
