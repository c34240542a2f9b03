"""The run page in a real browser: a real worker is SIGKILLed in the middle of a batch of
migrate-records, recovery retries the batch on another worker, and the run page shows
where the worker died and the retry, refreshing itself while the run is active."""

from __future__ import annotations

import signal

import pytest

from runs import engine
from runs.models import Attempt
from runs.states import AttemptStatus, RunStatus
from tests.browser.conftest import ARTIFACTS, wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.integration.helpers import wait_settled
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.workers]


def classes(locator) -> list[str]:
    return [c.get_attribute("class") for c in locator.all()]


def test_run_page_shows_where_the_worker_died_and_the_retry(cluster, browser):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.page

    doomed = cluster.worker(faults="after_effect:migrate:120")
    cluster.beat()
    run = engine.submit_run(workflow="migrate-records", input={"count": 200, "batch_size": 50})
    page.goto(f"{browser.base_url}/runs/{run.id}/")
    page.evaluate("window.noReloadMarker = 'still here'")  # a reload would erase it
    assert page.locator("#run-live[data-poll]").count() == 1  # an active run refreshes itself

    assert doomed.wait_exit() == -signal.SIGKILL
    cluster.worker()
    run = wait_settled(run, cluster)
    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    crashed = Attempt.objects.get(run=run, status=AttemptStatus.CRASHED)
    batch = crashed.step
    assert batch.key == "migrate[2]"  # item 120 is the 20th of the third batch

    # The open page notices the end by itself, then stops polling.
    page.locator("#run-status .status-succeeded").wait_for(timeout=20_000)
    assert page.evaluate("window.noReloadMarker") == "still here"
    assert page.locator("#run-live").get_attribute("hx-trigger") is None
    assert "run_succeeded" in page.locator("#events").inner_text()  # the final log came too

    # Four batches: one lane each. The batch that crashed shows the crash, then the retry.
    timeline = page.locator("svg.timeline")
    lane = timeline.locator(f'g.lane[data-lane="{batch.key}"]')
    assert classes(lane.locator("g.bar")) == [
        "bar attempt attempt-crashed",
        "bar attempt attempt-succeeded",
    ]
    crash = lane.locator('g[data-mark="crash"]')
    assert crash.count() == 1
    title = crash.locator("title").text_content()
    assert f"worker {crashed.worker} died here" in title
    # Item 120 was the 20th of this batch: the worker died after committing 19 of them.
    assert "last sign of life" in title and "item 19 committed" in title
    assert "lease expired" in lane.inner_html() and "declared crashed" in lane.inner_html()
    assert "worker died" in crash.locator("text").text_content()
    crash_box, retry_box = crash.bounding_box(), lane.locator("g.attempt-succeeded").bounding_box()
    assert crash_box["x"] + crash_box["width"] <= retry_box["x"]  # died first, retried later
    assert lane.locator("line.tl-retry").count() == 1  # the gap until the retry
    for other in ("migrate[0]", "migrate[1]", "migrate[3]"):
        bars = timeline.locator(f'g.lane[data-lane="{other}"] g.bar')
        assert classes(bars) == ["bar attempt attempt-succeeded"]
    assert timeline.locator("g.mk-crash").count() == 2  # on the batch lane and the map lane
    assert "crashed" in page.locator(".tl-frame").get_attribute("aria-label")
    browser.screenshot("run-crashed-batch")
    browser.screenshot("run-crashed-batch", width=390)
    page.locator("#timeline").screenshot(path=str(ARTIFACTS / "run-timeline-1280.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.locator("#timeline").screenshot(path=str(ARTIFACTS / "run-timeline-390.png"))
    page.screenshot(path=str(ARTIFACTS / "run-top-390.png"))
    page.set_viewport_size({"width": 1280, "height": 900})

    # Collapsed, the map step's lane still says where a worker died.
    page.get_by_role("link", name="Hide the batches of migrate").click()
    page.locator(f'svg.timeline g.lane[data-lane="{batch.key}"]').wait_for(state="detached")
    map_lane = page.locator('svg.timeline g.lane[data-lane="migrate"]')
    assert map_lane.locator("g.mk-crash").count() == 1
    assert "migrate[2]: worker died" in map_lane.locator("g.mk-crash text").text_content()
    assert "collapse=migrate" in page.url
    browser.screenshot("run-crashed-batch-collapsed")
    page.get_by_role("link", name="Show the 4 batches of migrate").click()
    page.locator(f'svg.timeline g.lane[data-lane="{batch.key}"]').wait_for()
    # Settled the moment it shows: the filter that came with the swap is wired already
    # (a change made while htmx still settled new content reached no listener).
    assert page.locator(".htmx-added, .htmx-settling").count() == 0

    # The event log, filtered to the crash.
    page.select_option("#type", "attempt_crashed")
    wait_for_address(page, lambda url: "type=attempt_crashed" in url, "?type=attempt_crashed")
    rows = page.locator("#events tbody tr")
    wait_for(lambda: rows.count() == 1, what="one attempt_crashed row")
    assert "attempt_crashed" in rows.first.inner_text()
    assert crashed.worker in rows.first.inner_text()
    assert page.evaluate("window.noReloadMarker") == "still here"
    browser.screenshot("run-events-filtered")


def test_operator_cancels_a_running_run_from_its_page(cluster, browser, tmp_path):
    make_user("olivia", "operators")
    marker = tmp_path / "inside"
    release = tmp_path / "release"
    cluster.worker(RUNS_LEASE_SECONDS="120")  # the step holds still until released
    run = engine.submit_run(
        workflow="slow-write",
        input={"marker": str(marker), "hold": 90.0, "release": str(release)},
    )
    wait_for(lambda: (tmp_path / "inside.1").exists(), what="the step to be running")

    browser.login("olivia", PASSWORD)
    page = browser.goto(f"/runs/{run.id}/")
    page.get_by_role("button", name="Cancel run…").click()
    dialog = page.locator("#cancel-dialog")
    assert "No new step will start" in dialog.inner_text()
    browser.screenshot("run-cancel-dialog")
    dialog.get_by_label("Reason").fill("wrong record")
    dialog.get_by_role("button", name="Cancel the run").click()

    page.locator("#messages li.success").wait_for()
    assert "Run cancelled" in page.locator("#messages").inner_text()
    assert "cancelled" in page.locator("#run-status").inner_text()
    run = wait_settled(run, cluster, until=(RunStatus.CANCELLED,))
    assert run.error == "cancelled by olivia: wrong record"
    release.touch()  # the running step may finish now
    # The attempt that was running finished and was recorded; nothing came after it.
    wait_for(
        lambda: Attempt.objects.filter(run=run, status=AttemptStatus.SUCCEEDED).exists(),
        what="the running attempt to finish",
        on_timeout=cluster.logs,
    )
    assert page.get_by_role("button", name="Cancel run…").count() == 0
    # The page goes on refreshing until that attempt ended, then stops.
    page.locator("#run-live:not([data-poll])").wait_for(timeout=15_000)
    assert "#1 succeeded" in page.locator("#run-live").inner_text()
    browser.screenshot("run-cancelled")


def test_overview_page(browser, transactional_db):
    make_user("olivia", "operators")
    from tests.support import factories

    factories.crashed("merge-change", count=2)
    factories.run_queued(engine.submit_run(workflow="pure-chain", input={}))
    failed = engine.submit_run(workflow="fork-fail", input={})
    factories.run_queued(failed)

    browser.login("olivia", PASSWORD)
    page = browser.page
    assert "2 unresolved claims" in page.locator("#overview-live").inner_text()
    assert "first attempt always fails" in page.locator("#overview-live").inner_text()
    assert page.locator("svg.chart rect.chart-bar").count() == 60
    browser.screenshot("overview")
