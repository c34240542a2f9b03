"""A bulk cancel in a real browser, with a real worker: from the runs list with a
filter, the preview by its control, the counts read, a reason typed, confirmed, the
progress bar followed to the end, the results listed; Back and Forward between the
list, the preview and the batch."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from runs import engine
from runs.models import Batch, Run
from runs.states import BatchStatus, RunStatus
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.workers]


def test_bulk_cancel_from_the_runs_list_to_its_results(cluster, browser):
    make_user("olivia", "operators")
    cluster.worker()
    waiting = [engine.submit_run(workflow="submitter-nudge", input={}) for _ in range(2)]
    ended = engine.submit_run(workflow="submitter-nudge", input={})
    engine.cancel_run(run_id=ended.id, actor="olivia", reason="a test")
    wait_for(
        lambda: Run.objects.filter(status=RunStatus.WAITING).count() == 2,
        what="two runs waiting for their signal",
        on_timeout=cluster.logs,
    )
    engine.submit_run(workflow="pure-chain", input={})  # another workflow: not selected

    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    page.get_by_label("Workflow").select_option("submitter-nudge")
    expect(page.locator("#runs > p.muted")).to_have_text("3 runs match")
    list_url = f"{browser.base_url}/runs/?workflow=submitter-nudge"
    wait_for_address(page, lambda url: url.startswith(list_url), list_url)

    controls = page.get_by_role("group", name="Bulk operations on the matching runs")
    expect(controls.get_by_role("link", name="Retry failed steps of matching…")).to_be_visible()
    browser.screenshot("bulk-controls")
    browser.screenshot("bulk-controls", width=390)
    controls.get_by_role("link", name="Cancel matching…").click()
    preview_url = f"{browser.base_url}/runs/bulk/?workflow=submitter-nudge&operation=cancel"
    wait_for_address(page, lambda url: url == preview_url, preview_url)
    expect(page.get_by_role("heading", name="Cancel matching active runs")).to_be_visible()
    expect(page.locator("#count-matched")).to_have_text("3")
    expect(page.locator("#count-applies")).to_have_text("2")
    expect(page.locator("#count-refused")).to_have_text("1")
    expect(page.get_by_text("already cancelled: only an active run is cancelled")).to_be_visible()
    browser.check_accessibility("the bulk preview")
    browser.screenshot("bulk-preview")
    browser.screenshot("bulk-preview", width=390)

    page.get_by_label(re.compile("^Reason")).fill("the nudges are not coming")
    page.get_by_role("button", name="Confirm").click()
    batch = wait_for(lambda: Batch.objects.first(), what="the batch")
    batch_url = f"{browser.base_url}/runs/batches/{batch.id}/"
    wait_for_address(page, lambda url: url == batch_url, batch_url)
    progress = page.get_by_role("progressbar", name="3 of 3 runs done")
    expect(progress).to_be_visible(timeout=60_000)
    expect(progress).to_have_attribute("value", "3")
    results = page.get_by_role("region", name="Results")
    expect(results.get_by_role("row")).to_have_count(4)  # the header and three runs
    table = results.get_by_role("table")
    expect(table.get_by_text("cancelled", exact=True)).to_have_count(2)
    expect(
        table.get_by_text(re.compile(r"is already cancelled; it cannot be cancelled"))
    ).to_have_count(1)
    # Above the table, what happened counted: the same message once, with its count.
    said = results.get_by_role("list", name="What happened, counted").get_by_role("listitem")
    expect(said).to_have_count(2)
    expect(said.first).to_have_text(re.compile(r"^2\s+applied\s+cancelled$"))
    expect(page.locator("#count-applied")).to_have_text("2")
    expect(page.locator("#count-refused")).to_have_text("1")
    browser.check_accessibility("the batch's results")
    browser.screenshot("bulk-results")
    browser.screenshot("bulk-results", width=390)
    assert Batch.objects.get().status == BatchStatus.SUCCEEDED
    assert {Run.objects.get(pk=r.id).status for r in waiting} == {RunStatus.CANCELLED}

    page.go_back()
    wait_for_address(page, lambda url: url == preview_url, preview_url)
    # The preview again, of the runs as they are now: nothing left to cancel.
    expect(page.locator("#count-applies")).to_have_text("0")
    expect(page.locator("#count-refused")).to_have_text("3")
    page.go_back()
    wait_for_address(page, lambda url: url.startswith(list_url), list_url)
    expect(page.get_by_label("Workflow")).to_have_value("submitter-nudge")
    page.go_forward()
    wait_for_address(page, lambda url: url == preview_url, preview_url)
    expect(page.get_by_role("heading", name="Cancel matching active runs")).to_be_visible()
    page.go_forward()
    wait_for_address(page, lambda url: url == batch_url, batch_url)
    expect(page.get_by_role("progressbar", name="3 of 3 runs done")).to_be_visible()
    assert Batch.objects.count() == 1
