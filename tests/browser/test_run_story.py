"""The run's story on its page in a real browser: a bulk batch's retry is said as who
retried it in which batch, its batch linked (Back returns), the failure and the reopen
are marked in the run's lane, and a pause that held the run is its own band; the text
list under the drawing says each, and the page passes axe."""

from __future__ import annotations

import re

import pytest
from celery import current_app
from django.http import QueryDict
from playwright.sync_api import expect

from runs import engine
from runs.batches import service
from tests.conftest import PASSWORD, make_user
from tests.support.batches import failed_runs

pytestmark = [pytest.mark.browser, pytest.mark.broker]


def test_a_bulk_retry_and_a_pause_tell_the_run_s_story(browser, transactional_db, monkeypatch):
    make_user("olivia", "operators")
    current_app.control.purge()
    try:
        (run,) = failed_runs(monkeypatch, 1)
        paused = engine.pause(workflow="fails-while-flagged", actor="ann", reason="db maintenance")
        batch = service.create_batch(
            operation="retry",
            params=QueryDict("status=failed"),
            actor="olivia",
            reason="card fixed",
        )
        service.process(batch.id)  # a worker took it up: the run is reopened, held by the pause
        engine.resume(pause_id=paused.pk, actor="bob", reason="done")

        browser.login("olivia", PASSWORD)
        page = browser.goto(f"/runs/{run.id}/")
        run_lane = page.locator('svg.timeline g.lane-run[data-lane="run"]')
        expect(run_lane.locator('[data-mark="run-failed"]')).to_have_count(1)
        expect(run_lane.locator('[data-mark="reopened"]')).to_have_count(1)
        expect(run_lane.locator('[data-mark="reopened"] > title')).to_have_text(
            re.compile(f"^retried by olivia in batch {batch.id}: card fixed at ")
        )
        expect(run_lane.locator("rect.tl-paused")).to_have_count(1)
        drawing = page.get_by_role("img", name=re.compile("Timeline of run"))
        expect(drawing).to_have_attribute(
            "aria-label", re.compile(f"It was retried by olivia in batch {batch.id}: card fixed")
        )
        expect(drawing).to_have_attribute(
            "aria-label", re.compile("paused by ann .*db maintenance")
        )

        page.get_by_text("Everything the timeline shows, as text").click()
        said = page.get_by_role("list", name="Everything the timeline shows")
        expect(said).to_contain_text("workflow paused by ann: db maintenance")
        expect(said).to_contain_text("stood failed for")
        browser.check_accessibility("a run retried by a bulk batch, after a pause")
        browser.screenshot("run-story")

        said.get_by_role("link", name=f"batch {batch.id}").first.click()
        page.wait_for_url(re.compile(rf"/runs/batches/{batch.id}/$"))
        expect(page.get_by_role("heading", level=1)).to_contain_text(f"atch {batch.id}")
        page.go_back()
        page.wait_for_url(re.compile(rf"/runs/{run.id}/$"))
        expect(page.get_by_role("img", name=re.compile("Timeline of run"))).to_be_visible()
        page.go_forward()
        page.wait_for_url(re.compile(rf"/runs/batches/{batch.id}/$"))
    finally:
        current_app.control.purge()
