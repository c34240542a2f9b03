"""Browser tests: real headless Chromium (Debian's, /usr/bin/chromium) driven by
Playwright for Python, against pytest-django's live server on the test database.

Without a Chromium a newcomer's `make test` skips these tests with one line saying how
to enable them; with `CI` set a missing browser is a failure. Screenshots go to
test-artifacts/screenshots/ (git-ignored): look at them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
# axe-core, from package.json (`make install` runs npm ci): the accessibility rules.
AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
# Without the background-networking flags Chromium keeps trying (and failing) to reach
# Google's hosts on a machine with no internet.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Playwright's sync API runs an event loop in this thread; Django's ORM refuses to run
# in a thread with a running loop unless told that this is deliberate.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        message = (
            f"Chromium not found at {CHROMIUM}: `apt-get install chromium` to run the browser tests"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Browser:
    """One person's browser: pages at a given width, console errors collected (a CSP
    violation or a JavaScript error fails the test)."""

    def __init__(self, chromium: Any, base_url: str) -> None:
        self.chromium, self.base_url = chromium, base_url
        # en-US whatever the machine's language: the date and time fields then read
        # month/day/year, hour:minute AM/PM, which the tests that type into them follow.
        self.context = chromium.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
        self.errors: list[str] = []
        # HTTP statuses a test provokes on purpose (allow_status): Chromium logs each such
        # answer as a console error, which is then not one of this test's failures.
        self.allowed_statuses: set[int] = set()
        self.page = self.new_page()

    def new_page(self) -> Any:
        page = self.context.new_page()
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        page.on(
            "console",
            lambda msg: (
                self.errors.append(f"console {msg.type}: {msg.text}")
                if msg.type == "error" and not self._allowed(msg.text)
                else None
            ),
        )
        return page

    def allow_status(self, *statuses: int) -> None:
        """The test provokes answers with these statuses (a form refused with 422, a
        decision someone else made first, 409): the pages swap them like a 200
        (base.html's htmx responseHandling), and Chromium's "Failed to load resource"
        line for each is expected. Any other console error still fails the test."""
        self.allowed_statuses.update(statuses)

    def _allowed(self, text: str) -> bool:
        return any(
            text.startswith(f"Failed to load resource: the server responded with a status of {s} ")
            for s in self.allowed_statuses
        )

    def goto(self, path: str) -> Any:
        self.page.goto(self.base_url + path)
        return self.page

    def login(self, username: str, password: str) -> None:
        page = self.goto("/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(self.base_url + "/")

    def check_accessibility(self, what: str) -> None:
        """axe-core's WCAG 2.1 A and AA rules on the page as it is now (an open dialog or
        panel included): no violation. Injected by the DevTools protocol, which the
        page's CSP does not govern; the page loads nothing itself (no `preload`: axe
        would fetch the stylesheets again, resolve their @imports against the page's
        URL, and insert them as <style> elements, which the CSP refuses; only
        css-orientation-lock reads them, and no stylesheet here locks the orientation)."""
        if not AXE.exists():
            message = f"axe-core not found at {AXE}: `make install` (needs npm) to check {what}"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        self.page.evaluate(AXE.read_text())
        found = self.page.evaluate(
            """() => axe.run(document, {
                runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]},
                resultTypes: ["violations"],
                preload: false,
            }).then(r => r.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + ": " + n.failureSummary),
            })))"""
        )
        assert not found, f"accessibility of {what}: " + "\n".join(
            f"{v['id']} ({v['impact']}): {v['help']}\n  " + "\n  ".join(v["nodes"]) for v in found
        )

    def screenshot(self, name: str, *, width: int = 1280) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.set_viewport_size({"width": width, "height": 900})
        path = ARTIFACTS / f"{name}-{width}.png"
        self.page.screenshot(path=str(path), full_page=True)
        self.page.set_viewport_size({"width": 1280, "height": 900})
        return path

    def close(self) -> None:
        self.context.close()


def wait_for_address(page: Any, matches: Callable[[str], bool], expected: str) -> None:
    """Wait until the address bar satisfies `matches` (an htmx push, a Back, a reload).

    It reads the page's current URL over and over rather than waiting for a navigation
    event (Playwright's wait_for_url), whose order against htmx's pushState and the
    reload a history miss makes is not fixed; and it says what the address was when it
    gives up."""
    deadline = time.monotonic() + 15
    while not matches(page.url):
        if time.monotonic() > deadline:
            raise AssertionError(f"the address is {page.url}, expected {expected}")
        page.wait_for_timeout(25)


def _person(chromium: Any, live_server: Any) -> Iterator[Browser]:
    person = Browser(chromium, live_server.url)
    try:
        yield person
    finally:
        person.close()
    assert not person.errors, person.errors


@pytest.fixture
def browser(chromium: Any, live_server: Any) -> Iterator[Browser]:
    yield from _person(chromium, live_server)


@pytest.fixture
def second_browser(chromium: Any, live_server: Any) -> Iterator[Browser]:
    """Another person at another browser (separate cookies)."""
    yield from _person(chromium, live_server)
