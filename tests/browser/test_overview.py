"""The overview (/) in a real browser: each of its links, clicked as a person clicks it,
lands on the page it names, with the filter it names."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from playwright.sync_api import expect

from runs.testing import run_inline
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.support import factories

pytestmark = pytest.mark.browser


def wait_for_page(page: Any, path: str, **query: str) -> None:
    def matches(url: str) -> bool:
        parts = urlsplit(url)
        return parts.path == path and dict(parse_qsl(parts.query)) == query

    wait_for_address(page, matches, f"{path} with {query}")


def test_each_overview_link_lands_where_it_says(browser, transactional_db):
    make_user("olivia", "operators")
    factories.crashed(count=2)  # two runs wait for a decision
    failed = run_inline("fork-fail")
    ran = run_inline("pure-chain")
    browser.login("olivia", PASSWORD)
    page = browser.page
    overview = page.get_by_role("heading", name="Overview", level=1)
    expect(overview).to_be_visible()
    nav = page.get_by_role("navigation", name="main")
    expect(nav.get_by_role("link", name="Overview")).to_have_attribute("aria-current", "page")
    browser.check_accessibility("the overview as an operator")
    browser.screenshot("overview-operator")

    page.get_by_role("link", name="Open the reconciliation queue").click()
    wait_for_page(page, "/reconciliation/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("2 unresolved claims")
    page.go_back()
    expect(overview).to_be_visible()

    # Each status's count links to the runs of that status: the link says both.
    status_filter = page.get_by_label("Status")
    count = page.locator("#runs > p.muted")
    for name, status, shown in (
        ("2 needs reconciliation", "needs_reconciliation", "2 runs match"),
        ("1 failed", "failed", "1 run matches"),
        ("1 succeeded", "succeeded", "1 run matches"),
        ("0 cancelled", "cancelled", "0 runs match"),
    ):
        page.get_by_role("link", name=name, exact=True).click()
        wait_for_page(page, "/runs/", status=status)
        expect(page.get_by_role("heading", name="Runs", level=1)).to_be_visible()
        expect(status_filter).to_have_value(status)
        expect(count).to_have_text(shown)
        page.go_back()
        expect(overview).to_be_visible()

    failures = page.get_by_role("region", name="Recent failures")
    failures.get_by_role("link", name=f"{str(failed.id)[:8]}…").click()
    wait_for_page(page, f"/runs/{failed.id}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("fork-fail@1 failed")
    page.go_back()

    recent = page.get_by_role("region", name="Runs")
    recent.get_by_role("link", name=f"{str(ran.id)[:8]}…").click()
    wait_for_page(page, f"/runs/{ran.id}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("pure-chain@1 succeeded")
    page.go_back()

    page.get_by_role("link", name="All runs").click()
    wait_for_page(page, "/runs/")
    expect(status_filter).to_have_value("")
    expect(count).to_have_text("4 runs")


def test_a_viewer_sees_the_overview_with_no_admin_and_no_new_run(browser, transactional_db):
    make_user("victor", "viewers")
    run_inline("pure-chain")
    browser.login("victor", PASSWORD)
    page = browser.page
    expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()
    nav = page.get_by_role("navigation", name="main")
    expect(nav.get_by_role("link")).to_have_text(
        ["Overview", "Reconciliation 0", "Runs", "Workers", "Pauses", "Reports"]
    )
    browser.check_accessibility("the overview as a viewer")
    page.get_by_role("link", name="All runs").click()
    wait_for_page(page, "/runs/")
    expect(page.get_by_role("link", name="New run…")).to_have_count(0)
