"""The decision reports page in a real browser: reached from the navigation, its
period changed with the form, Back and Forward bring each period back (its field and
its numbers), a CSV downloaded by its link; axe finds nothing at 1280 and 390 px, and
the screenshots at both widths are for a person to look at (the charts scale with
their viewBox)."""

from __future__ import annotations

import csv
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.pages.test_reports import Claims

pytestmark = [pytest.mark.browser, pytest.mark.tampers]


def recent_claims() -> None:
    """ann decided 19 days ago; within the last week a probe and bob decided, and one
    claim still waits."""
    now = timezone.now()
    day = timedelta(days=1)
    c = Claims()
    c.claim("merge-change", "merge", now - 20 * day, now - 19 * day, by="ann")
    c.claim("merge-change", "merge", now - 9 * day, now - 8 * day, by="ann", outcome="failed")
    c.claim(
        "merge-change", "merge", now - 3 * day, now - 3 * day + timedelta(minutes=10), by="probe"
    )
    c.claim("charge-payment", "charge", now - 12 * day)
    c.claim("charge-payment", "charge", now - 5 * day)
    c.claim("charge-payment", "charge", now - 2 * day, now - day, by="bob", outcome="failed")


def test_the_reports_page_period_history_and_csv(browser, transactional_db):
    recent_claims()
    make_user("vera", "viewers")
    browser.login("vera", PASSWORD)
    page = browser.page
    nav = page.get_by_role("navigation", name="main")
    nav.get_by_role("link", name="Reports").click()
    wait_for_address(page, lambda url: url.endswith("/reports/"), "/reports/")
    expect(page.get_by_role("heading", name="Decision reports", level=1)).to_be_visible()
    expect(nav.get_by_role("link", name="Reports")).to_have_attribute("aria-current", "page")

    operators = page.get_by_role("table", name="Decisions per operator")
    expect(operators.get_by_role("row")).to_have_count(3)  # the header, ann, bob
    expect(operators.get_by_role("row", name="ann")).to_contain_text("2")
    for name in ("Unresolved claims over time", "Time to decide", "Outcomes per step"):
        expect(page.get_by_role("heading", name=name, level=2)).to_be_visible()
    expect(
        page.get_by_role("img", name="Unresolved claims per workflow, at most 3")
    ).to_be_visible()
    browser.check_accessibility("the reports page at 1280 px")
    browser.screenshot("reports")
    page.set_viewport_size({"width": 390, "height": 900})
    browser.check_accessibility("the reports page at 390 px")
    browser.screenshot("reports", width=390)
    # Each chart at its width, to look at closely (the whole page is downscaled to view).
    for name in ("unresolved", "time-to-decide", "operators"):
        path = ARTIFACTS / f"reports-{name}-390.png"
        page.set_viewport_size({"width": 390, "height": 900})
        page.locator(f"section[data-report={name}]").screenshot(path=str(path))
    page.set_viewport_size({"width": 1280, "height": 900})

    # The last week: ann's decisions are older.
    today = timezone.localdate()
    week = (today - timedelta(days=6)).isoformat()
    first_day = page.get_by_label("First day")
    first_day.fill(week)
    page.get_by_role("button", name="Show").click()
    wait_for_address(page, lambda url: f"since={week}" in url, f"since={week}")
    expect(first_day).to_have_value(week)
    expect(operators.get_by_role("row")).to_have_count(2)  # the header, bob
    expect(operators.get_by_role("row", name="bob")).to_be_visible()

    page.go_back()
    wait_for_address(page, lambda url: url.endswith("/reports/"), "/reports/")
    expect(first_day).to_have_value((today - timedelta(days=29)).isoformat())
    expect(operators.get_by_role("row")).to_have_count(3)
    page.go_forward()
    wait_for_address(page, lambda url: f"since={week}" in url, f"since={week}")
    expect(first_day).to_have_value(week)
    expect(operators.get_by_role("row")).to_have_count(2)

    with page.expect_download() as arrived:
        page.get_by_role("link", name="Download CSV: Decisions per operator").click()
    download = arrived.value
    assert download.failure() is None
    assert download.suggested_filename == f"decisions-operators-{week}-{today}.csv"
    with Path(download.path()).open(newline="") as f:
        assert list(csv.reader(f)) == [
            ["Operator", "Decisions", "Succeeded", "Failed"],
            ["bob", "1", "0", "1"],
        ]
    assert f"since={week}" in page.url  # a download: the page stays

    # A first day after the last is refused beside its field.
    browser.allow_status(400)
    first_day.fill((today + timedelta(days=3)).isoformat())
    page.get_by_label("Last day").fill(today.isoformat())
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_text("The first day must be on or before the last day.")).to_be_visible()
    expect(first_day).to_have_attribute("aria-invalid", "true")
