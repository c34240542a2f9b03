"""The workers page in a real browser: reached from the navigation by its link, its
tables read by name, an attempt's link to its run, Back to the page; its live part
refreshes itself in place (htmx) and a silent worker says so; at 1280 and 390 px."""

from __future__ import annotations

import pytest
from django.db import connection
from playwright.sync_api import expect

from runs import engine
from runs.engine.tools import start_attempt
from runs.models import Step, WorkerProcess
from runs.states import StepStatus
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def test_the_workers_page_from_the_navigation_to_a_run_and_back(browser, transactional_db):
    make_user("vera", "viewers")
    WorkerProcess.objects.create(name="w1@host-a", host="host-a", pid=4242, pool_pids=[4242])
    quiet = WorkerProcess.objects.create(name="w2@host-b", host="host-b", pid=77, pool_pids=[77])
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_workerprocess SET heartbeat_at = now() - interval '2 hours' WHERE id = %s",
            [quiet.id],
        )
    run = engine.submit_run(workflow="pure-chain", input={})
    step = Step.objects.get(run=run, status=StepStatus.QUEUED)
    start_attempt(step_id=step.id, worker="host-a:4242")
    engine.submit_run(workflow="pure-chain", input={})  # its first step waits

    browser.login("vera", PASSWORD)
    page = browser.page
    nav = page.get_by_role("navigation", name="main")
    nav.get_by_role("link", name="Workers").click()
    wait_for_address(page, lambda url: url.endswith("/workers/"), "/workers/")
    heading = page.get_by_role("heading", name="Workers and queues", level=1)
    expect(heading).to_be_visible()
    expect(nav.get_by_role("link", name="Workers")).to_have_attribute("aria-current", "page")
    expect(nav.get_by_role("link", name="Runs")).not_to_have_attribute("aria-current", "page")

    workers = page.get_by_role("region", name="Live workers")
    expect(workers.get_by_role("row")).to_have_count(3)  # the header and two workers
    busy = workers.get_by_role("row", name="w1@host-a")
    expect(busy).to_contain_text("host-a")
    expect(busy).to_contain_text("4242")
    silent = workers.get_by_role("row", name="w2@host-b")
    expect(silent).to_contain_text("silent since")
    expect(busy).not_to_contain_text("silent")
    expect(page.get_by_test_id("waiting")).to_have_text("1")
    expect(page.get_by_role("table", name="Messages waiting per queue")).to_be_visible()
    browser.check_accessibility("the workers page")
    browser.screenshot("workers")
    browser.screenshot("workers", width=390)

    # The live part refreshes itself: a step queued now shows without a reload.
    engine.submit_run(workflow="pure-chain", input={})
    expect(page.get_by_test_id("waiting")).to_have_text("2", timeout=12_000)
    expect(heading).to_be_visible()

    busy.get_by_role("link", name="first").click()
    wait_for_address(page, lambda url: url.endswith(f"/runs/{run.id}/"), f"/runs/{run.id}/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("pure-chain")
    page.go_back()
    wait_for_address(page, lambda url: url.endswith("/workers/"), "/workers/ again")
    expect(heading).to_be_visible()
    expect(page.get_by_role("region", name="Live workers").get_by_role("row")).to_have_count(3)


def test_steps_held_by_a_pause_are_counted_apart_with_a_link_to_the_pauses(
    browser, transactional_db
):
    """Two merges held by a pause, a pure-chain step free: one step waits for a worker,
    the two held ones are said apart and link to the Pauses page; Back returns."""
    make_user("vera", "viewers")
    engine.pause(workflow="merge-change", step="merge", actor="ann", reason="the host is down")
    for n in (1, 2):
        engine.submit_run(workflow="merge-change", input={"change_id": n})
    engine.submit_run(workflow="pure-chain", input={})

    browser.login("vera", PASSWORD)
    page = browser.goto("/workers/")
    waiting = page.get_by_role("region", name="Waiting for a free worker")
    expect(page.get_by_test_id("waiting")).to_have_text("1")
    held = page.get_by_test_id("paused-waiting")
    expect(held).to_contain_text("2 more queued steps held by a pause")
    browser.screenshot("workers-paused")

    waiting.get_by_role("link", name="Pauses").click()
    wait_for_address(page, lambda url: url.endswith("/pauses/"), "/pauses/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Pause")
    page.go_back()
    wait_for_address(page, lambda url: url.endswith("/workers/"), "/workers/ again")
    expect(page.get_by_test_id("paused-waiting")).to_contain_text("2 more")
    page.go_forward()
    wait_for_address(page, lambda url: url.endswith("/pauses/"), "/pauses/ again")
