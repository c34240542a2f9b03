"""The reconciliation queue and a claim's own page in a real browser, used the way an
operator uses them: ticking claims for a bulk decision, opening a claim, deciding it
with the mouse or the keyboard, losing a race to a colleague, and a queue of a few
hundred claims. Claims are made by tests/factories.py (no workers needed)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from reconciliation import views
from tests import factories
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser

ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


# --- helpers -------------------------------------------------------------------------------
def signed_in(
    browser, name: str = "olivia", role: str = "operators", path: str = "/reconciliation/"
):
    make_user(name, role)
    browser.login(name, PASSWORD)
    return browser.goto(path)


def claim_row(page, claim):
    """The claim's row in the queue, found by the link to its run (shown at every width)."""
    run_link = page.get_by_role("link", name=f"{str(claim.run_id)[:8]}…", exact=True)
    return page.get_by_role("row").filter(has=run_link)


def bulk_form(page):
    return page.get_by_role("form", name="bulk decision")


def decide_form(page, claim):
    return page.get_by_role("form", name=f"decide claim {claim.key}")


def heading(page):
    return page.get_by_role("heading", level=1)


def queue_rows(page):
    """The claims' rows in the queue table (its header row left out)."""
    return page.get_by_role("region", name="Unresolved claims").locator("tbody > tr:not(.detail)")


def focused(page) -> dict:
    """What has the keyboard focus: its tag, accessible-ish name, and the labelled region
    (section or form) it sits in."""
    return page.evaluate(
        """() => {
            const e = document.activeElement;
            const name = e.getAttribute('aria-label')
                || (e.labels && e.labels.length ? e.labels[0].textContent : e.textContent);
            const within = e.closest('section[aria-label], form[aria-label]');
            return {tag: e.tagName.toLowerCase(), name: (name || '').trim().replace(/\\s+/g, ' '),
                    within: within ? within.getAttribute('aria-label') : null};
        }"""
    )


def tab_to(page, target, *, limit: int = 40) -> list[dict]:
    """Press Tab until `target` has the focus (failing after `limit` presses); returns
    every stop on the way, the target's included."""
    stops = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        stops.append(focused(page))
        if target.evaluate("e => e === document.activeElement"):
            return stops
    raise AssertionError(f"Tab never reached {target}: {stops}")


def keep_live_region(page) -> None:
    """Remember the live region's node: an announcement is a change inside it (a screen
    reader does not read a region that was replaced as a whole)."""
    page.evaluate("window.liveRegion = document.getElementById('messages')")


def live_region_kept(page) -> bool:
    return page.evaluate("document.getElementById('messages') === window.liveRegion")


# --- 1. selecting claims for a bulk decision ----------------------------------------------
def test_ticking_claims_enables_preview_and_editing_the_form_keeps_the_selection(
    browser, transactional_db
):
    claims = factories.crashed(count=3)
    page = signed_in(browser)
    bulk = bulk_form(page)
    preview = bulk.get_by_role("button", name="Preview…")
    expect(preview).to_be_disabled()

    page.get_by_role("checkbox", name=f"select claim {claims[0].key}").check()
    page.get_by_role("checkbox", name=f"select claim {claims[2].key}").check()
    expect(bulk).to_contain_text("2 selected")
    expect(preview).to_be_enabled()

    # Writing the note and choosing the outcome does not forget the ticks.
    bulk.get_by_label("Outcome").select_option(label="failed: the effect did NOT happen")
    bulk.get_by_label("Note (why)").press_sequentially("none merged on the host")
    page.keyboard.press("Tab")  # leaving the note fires its change event
    expect(bulk).to_contain_text("2 selected")
    expect(preview).to_be_enabled()

    page.get_by_role("checkbox", name="select all claims").check()
    expect(bulk).to_contain_text("3 selected")
    select_all = page.get_by_role("checkbox", name="select all claims")
    page.get_by_role("checkbox", name=f"select claim {claims[1].key}").uncheck()
    expect(bulk).to_contain_text("2 selected")
    expect(select_all).not_to_be_checked()  # some, not all: shown as mixed
    assert select_all.evaluate("box => box.indeterminate")
    select_all.check()
    expect(bulk).to_contain_text("3 selected")
    select_all.uncheck()
    expect(bulk).to_contain_text("0 selected")
    expect(preview).to_be_disabled()


# --- 2. a bulk confirm takes the resolved claims off the table -----------------------------
def test_confirmed_claims_leave_the_table_and_the_selection(browser, transactional_db):
    claims = factories.crashed(count=3)
    page = signed_in(browser)
    bulk = bulk_form(page)
    for claim in claims[:2]:
        page.get_by_role("checkbox", name=f"select claim {claim.key}").check()
    bulk.get_by_label("Outcome").select_option(label="failed: the effect did NOT happen")
    bulk.get_by_label("Note (why)").press_sequentially("none merged on the host")
    bulk.get_by_role("button", name="Preview…").click()
    expect(page.get_by_role("form", name="confirm bulk decision")).to_contain_text(
        "Preview: resolve 2 claims as failed"
    )
    page.get_by_role("button", name="Confirm: resolve 2 claims").click()

    expect(page.get_by_role("region", name="bulk result")).to_contain_text(
        "2 claim(s) resolved as failed"
    )
    for claim in claims[:2]:
        expect(claim_row(page, claim)).to_have_count(0)
    expect(claim_row(page, claims[2])).to_have_count(1)
    expect(queue_rows(page)).to_have_count(1)
    expect(bulk).to_contain_text("0 selected")
    expect(bulk.get_by_role("button", name="Preview…")).to_be_disabled()
    expect(page.locator("#queue-badge")).to_have_text("1")
    browser.screenshot("queue-after-bulk")


# --- 3. the run page's "decide" link reaches a claim beyond the queue's first page --------
def test_the_run_pages_decide_link_opens_a_claim_beyond_the_first_page(
    browser, transactional_db, monkeypatch
):
    monkeypatch.setattr(views, "PAGE_SIZE", 2)  # the claim is on the queue's page 2
    claims = factories.crashed(count=3)
    last = claims[-1]
    page = signed_in(browser, path=f"/runs/{last.run_id}/")
    page.get_by_role("region", name="Claims").get_by_role("link", name="decide").click()
    expect(decide_form(page, last)).to_be_visible()
    expect(heading(page)).to_contain_text("unresolved")
    browser.screenshot("claim-page")
    browser.screenshot("claim-page", width=390)


# --- 6. the heading's count agrees with the table and the badge ----------------------------
def test_the_heading_counts_what_the_table_shows(browser, transactional_db):
    merges = factories.crashed(count=2)
    factories.crashed("merge-change-probed", count=1)
    page = signed_in(browser)
    expect(heading(page)).to_contain_text("3 unresolved claims")

    page.get_by_label("Workflow").select_option(label="merge-change (2)")
    expect(queue_rows(page)).to_have_count(2)
    expect(heading(page)).to_contain_text("2 of 3 unresolved claims")
    filtered = heading(page).inner_text()
    page.reload()  # the same address loaded directly says the same
    expect(queue_rows(page)).to_have_count(2)
    expect(heading(page)).to_have_text(filtered)

    claim_row(page, merges[0]).get_by_role("link", name="Details").click()
    form = decide_form(page, merges[0])
    form.get_by_label("failed: the effect did NOT happen").check()
    form.get_by_label("Note: how do you know?").press_sequentially("nothing on the host")
    form.get_by_role("button", name="Resolve claim").click()
    expect(queue_rows(page)).to_have_count(1)
    expect(heading(page)).to_contain_text("1 of 2 unresolved claims")
    expect(page.locator("#queue-badge")).to_have_text("2")

    page.get_by_label("Workflow").select_option(label="all")
    expect(queue_rows(page)).to_have_count(2)
    expect(heading(page)).to_contain_text("2 unresolved claims")
    expect(heading(page)).not_to_contain_text(" of ")
