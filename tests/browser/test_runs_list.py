"""The runs list in a real browser: its filters, as a person uses them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs import engine
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def test_clear_comes_and_goes_with_the_filters(browser, transactional_db):
    make_user("olivia", "operators")
    engine.submit_run(workflow="merge-change", input={"change_id": 1})
    engine.submit_run(workflow="pure-chain", input={})
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    clear = page.get_by_role("link", name="Clear")
    count = page.locator("#runs > p.muted")
    expect(count).to_have_text("2 runs")
    expect(clear).to_have_count(0)

    page.get_by_label("Workflow").select_option("pure-chain")
    expect(count).to_have_text("1 run matches")
    expect(clear).to_be_visible()
    browser.screenshot("runs-filtered")
    browser.screenshot("runs-filtered", width=390)
    clear.click()
    expect(page).to_have_url(f"{browser.base_url}/runs/")
    expect(count).to_have_text("2 runs")
    expect(page.get_by_label("Workflow")).to_have_value("")
    expect(clear).to_have_count(0)

    search = page.get_by_label("Search")
    search.press_sequentially("no-such-key")  # the list follows the typing
    expect(count).to_have_text("0 runs match")
    expect(clear).to_be_visible()
    search.press("Control+a")
    search.press("Backspace")
    expect(count).to_have_text("2 runs")
    expect(clear).to_have_count(0)


def test_created_until_a_minute_includes_that_whole_minute(browser, transactional_db):
    make_user("olivia", "operators")
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    minute = timezone.localtime(run.created_at).replace(second=0, microsecond=0)
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    count = page.locator("#runs > p.muted")
    until = page.get_by_label("Created until")

    # The datetime-local control sends the minute (HH:MM); the run was created at some
    # second of it, and "until HH:MM" includes it.
    until.fill(minute.strftime("%Y-%m-%dT%H:%M"))
    expect(count).to_have_text("1 run matches")
    expect(page.locator("#runs tbody")).to_contain_text(str(run.id)[:8])
    # Until the minute before: it is not included.
    until.fill((minute - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M"))
    expect(count).to_have_text("0 runs match")
    # From that minute: included.
    until.fill("")
    page.get_by_label("Created from").fill(minute.strftime("%Y-%m-%dT%H:%M"))
    expect(count).to_have_text("1 run matches")
