"""Sending a signal from the run page in a real browser: an operator opens the dialog
of a run that waits, sends the approval with a payload, and the real worker finishes
the run; the page shows it."""

from __future__ import annotations

import pytest

from runs import engine
from runs.models import Signal, Step
from runs.states import RunStatus, StepStatus
from tests.conftest import PASSWORD, make_user
from tests.integration.helpers import wait_settled
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.workers]


def test_operator_sends_the_approval_from_the_run_page(cluster, browser):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.page
    cluster.worker()
    run = engine.submit_run(workflow="agent-refund", input={"ticket": 9, "amount": 12})
    wait_for(
        lambda: Step.objects.filter(run=run, name="approval", status=StepStatus.WAITING).exists(),
        what="the approval wait",
        on_timeout=cluster.logs,
    )
    page.goto(f"{browser.base_url}/runs/{run.id}/")
    page.get_by_role("button", name="Send signal “approval”…").click()
    dialog = page.locator("dialog[open]")
    dialog.locator("textarea").fill('{"approved": true}')
    browser.screenshot("run-signal-dialog")
    dialog.get_by_role("button", name="Send the signal").click()

    run = wait_settled(run, cluster)
    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    signal = Signal.objects.get(run=run)
    assert (signal.payload, signal.actor) == ({"approved": True}, "olivia")
    page.locator("#run-status .status-succeeded").wait_for(timeout=20_000)
    browser.screenshot("run-signalled-succeeded")
