"""Past resolutions (/reconciliation/history/) in a real browser: its filters as a
person sets them (the workflow chosen, days typed into the day fields, a day the page
cannot use refused beside its field), the links to a run and back to the queue, and the
evidence folded in each row."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.engine import resolve_claim
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.support import factories

pytestmark = pytest.mark.browser


def wait_for_query(page: Any, **query: str) -> None:
    def matches(url: str) -> bool:
        parts = urlsplit(url)
        return parts.path == "/reconciliation/history/" and dict(parse_qsl(parts.query)) == query

    wait_for_address(page, matches, f"the history with {query}")


def type_day(field: Any, day: date) -> None:
    """Type a day into a date field as a person does: a click on its first part (the
    month: this Chromium's fields read month/day/year), then the digits, each part
    moving on to the next when full. Each whole day typed is a change (a year typed
    digit by digit is a day several times over); the last one is what the page shows."""
    box = field.bounding_box()
    field.click(position={"x": 12, "y": box["height"] / 2})
    field.press_sequentially(day.strftime("%m%d%Y"))


@pytest.fixture
def resolutions(transactional_db):
    merges = factories.crashed("merge-change", count=2)
    probed = factories.crashed("merge-change-probed", count=1)[0]
    resolve_claim(merges[0], "failed", actor="ann", note="no merge on the code host")
    resolve_claim(
        merges[1], "succeeded", actor="bob", note="merge 12 seen", result={"merge_id": 12}
    )
    resolve_claim(probed, "failed", actor="ann", note="nothing merged")
    return {"merges": merges, "probed": probed}


def test_the_workflow_and_the_days_filter_the_history(browser, resolutions):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/reconciliation/history/")
    count = page.locator("#history > p.muted")
    rows = page.get_by_role("region", name="Past resolutions").locator("tbody tr")
    expect(count).to_have_text("3 resolutions")

    workflow = page.get_by_label("Workflow")
    workflow.select_option("merge-change-probed")
    wait_for_query(page, workflow="merge-change-probed")
    expect(count).to_have_text("1 resolution")
    expect(rows).to_contain_text(["nothing merged"])
    workflow.select_option("")
    wait_for_query(page)
    expect(count).to_have_text("3 resolutions")

    today = timezone.localdate()
    since = page.get_by_label("From (day)")
    until = page.get_by_label("Until (day, included)")
    type_day(since, today + timedelta(days=1))
    wait_for_query(page, since=(today + timedelta(days=1)).isoformat())
    expect(count).to_have_text("0 resolutions")
    expect(rows).to_have_text(["No resolutions with these filters."])
    type_day(since, today)
    wait_for_query(page, since=today.isoformat())
    expect(count).to_have_text("3 resolutions")
    type_day(until, today - timedelta(days=1))
    wait_for_query(page, since=today.isoformat(), until=(today - timedelta(days=1)).isoformat())
    expect(count).to_have_text("0 resolutions")
    type_day(until, today)  # the whole day is included
    wait_for_query(page, since=today.isoformat(), until=today.isoformat())
    expect(count).to_have_text("3 resolutions")
    browser.screenshot("history-filtered-by-day")


def test_a_day_the_page_cannot_count_to_is_refused_beside_its_field(browser, resolutions):
    make_user("olivia", "operators")
    browser.allow_status(400)  # the answer to a refused filter
    browser.login("olivia", PASSWORD)
    page = browser.goto("/reconciliation/history/")
    count = page.locator("#history > p.muted")
    until = page.get_by_label("Until (day, included)")

    type_day(until, date(9999, 12, 31))  # "until" the calendar's last day: nothing is after it
    wait_for_query(page, until="9999-12-31")
    expect(until).to_have_attribute("aria-invalid", "true")
    expect(until).to_have_accessible_description(
        "'9999-12-31' is past the last day this page can count to"
    )
    expect(page.locator(".field.invalid")).to_contain_text("past the last day")
    expect(count).to_have_text("3 resolutions")  # the bad filter is left out
    browser.check_accessibility("the history with a refused day")
    browser.screenshot("history-refused-day")

    type_day(until, timezone.localdate())  # corrected: the error goes
    wait_for_query(page, until=timezone.localdate().isoformat())
    expect(until).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator(".field.invalid")).to_have_count(0)
    expect(count).to_have_text("3 resolutions")


def test_a_rows_evidence_its_run_and_the_way_back_to_the_queue(browser, resolutions):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/reconciliation/history/")
    table = page.get_by_role("region", name="Past resolutions")
    decided = resolutions["merges"][1]
    row = table.get_by_role("row").filter(has_text="merge 12 seen")
    evidence = row.get_by_role("group")
    expect(evidence.locator("pre")).to_be_hidden()
    row.get_by_text("show").click()
    expect(evidence.locator("pre")).to_be_visible()
    expect(evidence.locator("pre")).to_contain_text('"merge_id": 12')
    browser.check_accessibility("the history with a row's evidence open")
    browser.screenshot("history-evidence")

    row.get_by_role("link", name=f"{str(decided.run_id)[:8]}…").click()
    run_page = f"/runs/{decided.run_id}/"
    wait_for_address(page, lambda url: urlsplit(url).path == run_page, run_page)
    expect(page.get_by_role("heading", level=1)).to_contain_text("merge-change@1")
    page.go_back()

    page.get_by_role("link", name="← Reconciliation queue").click()
    wait_for_address(page, lambda url: urlsplit(url).path == "/reconciliation/", "the queue")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Reconciliation")
