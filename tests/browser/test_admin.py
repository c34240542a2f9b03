"""/admin/ in a real browser: one page each time, never a loop of redirects."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def record_documents(page: Any) -> list[tuple[str, int]]:
    """(url, status) of every page the tab loads (redirects included)."""
    loads: list[tuple[str, int]] = []

    def seen(response: Any) -> None:
        if response.request.resource_type == "document":
            loads.append((response.url, response.status))

    page.on("response", seen)
    return loads


def test_a_viewer_opening_the_admin_gets_one_page_saying_why(browser, transactional_db):
    make_user("victor", "viewers")
    browser.login("victor", PASSWORD)
    page = browser.page
    assert page.locator("nav").get_by_role("link", name="Admin").count() == 0  # not offered
    loads = record_documents(page)
    browser.goto("/admin/")

    expect(page.get_by_role("heading", name="The admin is not for your account")).to_be_visible()
    expect(page.locator("main")).to_contain_text("You are signed in as victor (viewer)")
    assert loads == [(f"{browser.base_url}/admin/", 403)]
    # Chrome logs the 403 of the page it shows; the page itself is fine.
    assert browser.errors == [
        "console error: Failed to load resource: the server responded with a status of 403 "
        "(Forbidden)"
    ]
    browser.errors.clear()
    browser.check_accessibility("/admin/ refused to a viewer")
    browser.screenshot("admin-refused", width=390)

    page.get_by_role("link", name="Back to the dashboard").click()
    expect(page).to_have_url(f"{browser.base_url}/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_someone_signed_out_goes_to_the_login_page_once(browser, transactional_db):
    make_user("olivia", "operators")
    page = browser.page
    loads = record_documents(page)
    browser.goto("/admin/")
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    assert [status for _, status in loads] == [302, 200]
    assert loads[-1][0] == f"{browser.base_url}/login/?next=/admin/"

    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{browser.base_url}/admin/")
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
