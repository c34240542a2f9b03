"""The layout in a real browser: login, navigation, logout, small screens."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from runs import engine
from tests.browser.conftest import wait_for_address
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


def wait_for_path(page, path: str) -> None:
    wait_for_address(page, lambda url: urlsplit(url).path == path, path)


def test_the_brand_and_each_navigation_link_land_where_they_say(browser, transactional_db):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    nav = page.get_by_role("navigation", name="main")
    overview = page.get_by_role("heading", name="Overview", level=1)

    nav.get_by_role("link", name="Overview").click()
    wait_for_path(page, "/")
    expect(overview).to_be_visible()
    expect(nav.get_by_role("link", name="Overview")).to_have_attribute("aria-current", "page")

    nav.get_by_role("link", name="Runs", exact=True).click()
    wait_for_path(page, "/runs/")
    expect(nav.get_by_role("link", name="Runs", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    expect(nav.get_by_role("link", name="Overview")).not_to_have_attribute("aria-current", "page")

    browser.goto("/reconciliation/history/")
    page.get_by_role("banner").get_by_role("link", name="durable-runs").click()
    wait_for_path(page, "/")
    expect(overview).to_be_visible()

    # An operator edits retention policies and schedules in the admin.
    nav.get_by_role("link", name="Admin").click()
    wait_for_path(page, "/admin/")
    expect(page.get_by_role("heading", name="Retention policies and schedules")).to_be_visible()
    expect(page.get_by_role("link", name="Retention policies")).to_be_visible()
    expect(page.get_by_role("link", name="Schedules")).to_be_visible()
    page.get_by_role("link", name="Back to the dashboard").click()  # and back to the product
    wait_for_path(page, "/")
    expect(overview).to_be_visible()


def test_too_many_failed_logins_show_a_page_saying_what_to_do(browser, transactional_db, settings):
    settings.AXES_FAILURE_LIMIT = 3
    make_user("olivia", "operators")
    browser.allow_status(429)  # the answer to a login refused for too many failures
    page = browser.goto("/login/")
    refused = page.get_by_role("alert")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        page.get_by_label("Username").fill("olivia")
        page.get_by_label("Password").fill("not it")
        page.get_by_role("button", name="Log in").click()
        expect(refused).to_contain_text("Please enter a correct username and password")
    page.get_by_label("Password").fill("still not it")
    page.get_by_role("button", name="Log in").click()

    locked = page.get_by_role("alert")
    expect(locked.get_by_role("heading", name="Too many failed logins")).to_be_visible()
    expect(locked).to_contain_text(
        "Logins for this username from your address are paused after 3 failed attempts"
    )
    expect(locked).to_contain_text("Try again in 15 minutes")
    expect(locked).to_contain_text("python manage.py axes_reset_username USERNAME")
    browser.check_accessibility("the page saying the login is paused")
    browser.screenshot("login-locked-out", width=390)

    # Back at the login page, even the right password waits for the pause to end.
    page.get_by_role("link", name="Back to the login page").click()
    wait_for_path(page, "/login/")
    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Too many failed logins")).to_be_visible()
    wait_for_path(page, "/login/")


SET_VISIBILITY = """(state) => {
    Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => state});
    document.dispatchEvent(new Event('visibilitychange'));
}"""


def test_badge_polls_only_while_the_tab_is_visible(browser, transactional_db):
    make_user("olivia", "operators")
    page = browser.page
    # The page's clock is the test's: the polling interval passes when the test says so,
    # not after a real wait.
    page.clock.install()
    browser.login("olivia", PASSWORD)
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if "/badge/" in r.url else None)
    # The tab goes to the background: a hidden document must not poll.
    page.evaluate(SET_VISIBILITY, "hidden")
    page.clock.run_for(12_000)  # two polling intervals (5 s each) and more
    # A request the timers made would be reported before the answer to a later call.
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => done(true)))")
    assert polls == []
    # Back in front: it refreshes at once, without waiting for the next tick.
    with page.expect_request(lambda r: "/badge/" in r.url):
        page.evaluate(SET_VISIBILITY, "visible")
    assert len(polls) == 1
    # And polls again at the next tick.
    with page.expect_request(lambda r: "/badge/" in r.url):
        page.clock.run_for(5_000)
    assert len(polls) == 2


def test_a_poll_after_the_login_went_idle_takes_the_tab_to_the_login_page(
    browser, transactional_db
):
    from django.contrib.sessions.backends.db import SessionStore

    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/?status=failed")
    # 31 minutes without a request from her: the login time moves back, and the cookie
    # with her last request's time is gone (runs/pages/sessions.py).
    key = next(c["value"] for c in browser.context.cookies() if c["name"] == "sessionid")
    session = SessionStore(session_key=key)
    session["login_at"] = session.get("login_at", 0) - 31 * 60
    session.save()
    browser.context.clear_cookies(name="last_activity")

    page.evaluate("() => window.htmx.trigger('#queue-badge', 'poll-now')")

    page.wait_for_url(f"{browser.base_url}/login/?next=/runs/%3Fstatus%3Dfailed")
    assert "signed out after 30 minutes without activity" in page.locator("main").inner_text()
    assert page.locator("#queue-badge").count() == 0
