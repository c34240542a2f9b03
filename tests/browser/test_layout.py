"""The layout in a real browser: login, navigation, logout, small screens."""

from __future__ import annotations

import pytest

from runs import engine
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def test_login_navigation_and_logout(browser, transactional_db):
    make_user("olivia", "operators")
    run = engine.submit_run(workflow="merge-change", input={"change_id": 3})

    browser.login("olivia", PASSWORD)
    page = browser.page
    assert page.locator("nav").get_by_role("link", name="Reconciliation").is_visible()
    assert page.locator(".who").inner_text().startswith("olivia")

    page.locator("nav").get_by_role("link", name="Runs", exact=True).click()
    page.get_by_role("link", name=str(run.id)[:8] + "…").click()
    assert page.locator("h1").inner_text().startswith("merge-change@1")
    browser.screenshot("run-page-pending")

    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{browser.base_url}/login/")
    browser.goto("/runs/")
    assert page.url.startswith(f"{browser.base_url}/login/?next=")


def test_wrong_password_shows_an_error_next_to_the_form(browser, transactional_db):
    make_user("olivia", "operators")
    page = browser.goto("/login/")
    page.fill("#id_username", "olivia")
    page.fill("#id_password", "not it")
    page.click("button[type=submit]")
    assert (
        "Please enter a correct username and password" in page.locator("[role=alert]").inner_text()
    )
    browser.screenshot("login-error", width=390)


SET_VISIBILITY = """(state) => {
    Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => state});
    document.dispatchEvent(new Event('visibilitychange'));
}"""


def test_badge_polls_only_while_the_tab_is_visible(browser, transactional_db):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.page
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if "/badge/" in r.url else None)
    # The tab goes to the background: a hidden document must not poll.
    page.evaluate(SET_VISIBILITY, "hidden")
    page.wait_for_timeout(6000)  # more than one polling interval (5 s)
    assert polls == []
    # Back in front: it refreshes at once, without waiting for the next tick.
    page.evaluate(SET_VISIBILITY, "visible")
    page.wait_for_timeout(500)
    assert len(polls) == 1
