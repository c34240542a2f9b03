"""Every page, and every dialog or panel a person opens on it, checked with axe-core's
WCAG 2.1 A and AA rules in Chromium: no violation. As an operator and as a viewer, at
1280 px and at 390 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from runs import engine
from runs.testing import run_inline
from tests.conftest import PASSWORD, make_user
from tests.support import factories

pytestmark = pytest.mark.browser


@pytest.fixture
def some_of_everything(transactional_db):
    """Runs in every state a page shows: succeeded, failed, waiting, unresolved, and
    one held by a pause (the pause shown on the overview, the pauses page, the queue)."""
    ran = run_inline("pure-chain")
    failed = run_inline("fork-fail")
    waiting = run_inline("wait-beside-failure")
    claim = factories.crashed_merge(change_id=77)
    engine.pause(workflow="merge-change", step="merge", actor="ann", reason="host down")
    paused = engine.submit_run(workflow="merge-change", input={"change_id": 78})
    return {
        "succeeded": ran,
        "failed": failed,
        "waiting": waiting,
        "claim": claim,
        "paused": paused,
    }


PAGES = [
    "/",
    "/runs/",
    "/runs/?status=succeeded",
    "/runs/new/",
    "/reconciliation/",
    "/reconciliation/history/",
    "/pauses/",
]


@pytest.mark.parametrize("role", ["operators", "viewers"])
@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_passes_axe(browser, some_of_everything, role, width):
    make_user("pat", role)
    browser.login("pat", PASSWORD)
    browser.page.set_viewport_size({"width": width, "height": 900})
    runs = [some_of_everything[k] for k in ("succeeded", "failed", "waiting", "paused")]
    for path in PAGES + [f"/runs/{run.id}/" for run in runs]:
        if path == "/runs/new/" and role == "viewers":
            continue
        browser.goto(path)
        browser.check_accessibility(f"{path} as {role} at {width} px")


def test_the_login_page_passes_axe(browser, transactional_db):
    browser.goto("/login/")
    browser.check_accessibility("/login/")
    engine.submit_run(workflow="pure-chain", input={})


@pytest.mark.parametrize("width", [1280, 390])
def test_the_run_page_with_each_dialog_open_passes_axe(browser, transactional_db, width):
    make_user("olivia", "operators")
    waiting = run_inline("submitter-nudge")  # waits for "nudge", no timeout: cancel, signal
    failed = run_inline("fork-fail")  # retry
    browser.login("olivia", PASSWORD)
    page = browser.page
    page.set_viewport_size({"width": width, "height": 900})

    browser.goto(f"/runs/{waiting.id}/")
    page.get_by_role("button", name="Cancel run…").click()
    dialog = page.get_by_role("dialog", name="Cancel this run?")
    expect(dialog).to_be_visible()
    browser.check_accessibility(f"the cancel dialog at {width} px")
    dialog.get_by_role("button", name="Keep it running").click()
    expect(dialog).to_be_hidden()

    page.get_by_role("button", name="Send signal “nudge”…").click()
    dialog = page.get_by_role("dialog", name="Send signal “nudge”?")
    expect(dialog).to_be_visible()
    browser.check_accessibility(f"the signal dialog at {width} px")
    dialog.get_by_label("Payload (JSON, optional)").fill("{not json")
    dialog.get_by_role("button", name="Send the signal").click()
    expect(dialog.get_by_role("alert")).to_contain_text("not valid JSON")
    browser.errors.clear()  # Chrome's line for the 422 that answers the refused form
    browser.check_accessibility(f"the signal dialog with its error at {width} px")
    browser.screenshot("a11y-signal-error", width=width)
    dialog.get_by_role("button", name="Not now").click()

    browser.goto(f"/runs/{failed.id}/")
    page.get_by_role("button", name="Retry failed step…").click()
    dialog = page.get_by_role("dialog", name="Retry doomed_branch?")
    expect(dialog.get_by_role("button", name="Retry now")).to_be_visible()
    browser.check_accessibility(f"the retry dialog at {width} px")
    browser.screenshot("a11y-retry-dialog", width=width)


@pytest.mark.parametrize("width", [1280, 390])
def test_the_new_run_form_with_its_errors_passes_axe(browser, transactional_db, width):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/new/?workflow=typed-order")
    page.set_viewport_size({"width": width, "height": 900})
    browser.check_accessibility(f"the new run form at {width} px")
    page.get_by_label("customer").fill("ann")
    page.get_by_label("amount").fill("0")
    page.get_by_role("button", name="Submit run").click()
    expect(page.locator(".field.invalid .error")).to_contain_text("greater than 0")
    # A screen reader hears the problem (and the hint) with the field, not only the
    # red text somewhere below it.
    amount = page.get_by_label("amount")
    expect(amount).to_have_attribute("aria-invalid", "true")
    expect(amount).to_have_accessible_description(re.compile(r"more than 0.*greater than 0"))
    browser.check_accessibility(f"the new run form with an error at {width} px")
    browser.screenshot("a11y-new-run-error", width=width)


@pytest.mark.parametrize("role", ["operators", "viewers"])
@pytest.mark.parametrize("width", [1280, 390])
def test_the_admin_passes_axe(browser, transactional_db, role, width):
    """An operator's admin (its index, a list, a form); a viewer's page saying why not."""
    make_user("pat", role)
    browser.login("pat", PASSWORD)
    browser.page.set_viewport_size({"width": width, "height": 900})
    paths = ["/admin/"]
    if role == "operators":
        paths += ["/admin/runs/retentionpolicy/", "/admin/runs/schedule/add/"]
    for path in paths:
        browser.goto(path)
        browser.check_accessibility(f"{path} as {role} at {width} px")
    browser.screenshot(f"a11y-admin-{role}", width=width)
    if role == "viewers":
        browser.errors.clear()  # Chrome's line for the 403 of the page saying why
