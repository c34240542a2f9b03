"""The reconciliation queue and a claim's own page in a real browser, used the way an
operator uses them: ticking claims for a bulk decision, opening a claim, deciding it
with the mouse or the keyboard, losing a race to a colleague, and a queue of a few
hundred claims. Claims are made by tests/support/factories.py (no workers needed)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.db.models.functions import Now
from playwright.sync_api import expect

from examples.fakes import CodeHost
from reconciliation import services, views
from runs.engine import resolve_claim
from runs.models import Claim
from runs.states import ClaimStatus
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.support import factories
from tests.support.waiting import wait_for

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
    return page.get_by_role("form", name="bulk decision", exact=True)


def decide_form(page, claim):
    return page.get_by_role("form", name=f"decide claim {claim.key}")


def heading(page):
    return page.get_by_role("heading", level=1)


def queue_rows(page):
    """The claims' rows in the queue table (its header row left out)."""
    return page.get_by_role("region", name="Unresolved claims").locator(
        "tbody[id^=claim-] > tr:not(.detail)"
    )


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


# --- 4. focus follows what opens and changes; results are announced -------------------------
def test_focus_moves_to_what_opened_or_changed_and_results_are_announced(browser, transactional_db):
    claims = factories.crashed(count=2)
    first, second = claims
    browser.allow_status(422)  # the refused form
    page = signed_in(browser)
    keep_live_region(page)

    details = claim_row(page, first).get_by_role("link", name="Details")
    details.focus()
    page.keyboard.press("Enter")
    expect(decide_form(page, first)).to_be_visible()
    assert focused(page)["within"] == f"claim {first.key}", focused(page)
    page.keyboard.press("Tab")  # the next Tab continues inside what just opened
    assert focused(page)["within"] == f"claim {first.key}", focused(page)

    form = decide_form(page, first)
    form.get_by_label("succeeded: the effect happened").check()
    form.get_by_label("Result, as JSON").press_sequentially('{"merge_id": 7')
    form.get_by_label("Note: how do you know?").press_sequentially("merge 7 on the host")
    form.get_by_role("button", name="Resolve claim").click()
    result = decide_form(page, first).get_by_label("Result, as JSON")
    expect(decide_form(page, first)).to_contain_text("not valid JSON")
    expect(result).to_be_focused()
    expect(result).to_have_value('{"merge_id": 7')

    result.press("End")
    result.press_sequentially("}")
    decide_form(page, first).get_by_role("button", name="Resolve claim").click()
    expect(claim_row(page, first)).to_have_count(0)
    message = page.locator("#messages li")
    expect(message).to_contain_text("resolved as succeeded")
    expect(message).to_be_focused()
    assert live_region_kept(page)

    claim_row(page, second).get_by_role("link", name="Details").click()
    decide_form(page, second).wait_for()
    page.get_by_role("button", name="I'm on it").click()
    expect(page.get_by_role("button", name="Release")).to_be_focused()
    expect(page.locator("#messages")).to_contain_text("You are on claim")
    assert live_region_kept(page)


# --- 5. someone else decided first --------------------------------------------------------
def test_a_claim_decided_meanwhile_by_someone_else_is_shown_decided(
    browser, second_browser, transactional_db
):
    claims = factories.crashed(count=2)
    claim = claims[0]
    browser.allow_status(409)  # her decision comes second
    page = signed_in(browser)
    claim_row(page, claim).get_by_role("link", name="Details").click()
    form = decide_form(page, claim)
    form.get_by_label("succeeded: the effect happened").check()
    form.get_by_label("Note: how do you know?").press_sequentially("I saw it merged")

    # Meanwhile bob decides the same claim on its own page.
    bobs = signed_in(second_browser, "bob", path=f"/reconciliation/claims/{claim.pk}/")
    bobs_form = decide_form(bobs, claim)
    bobs_form.get_by_label("failed: the effect did NOT happen").check()
    bobs_form.get_by_label("Note: how do you know?").press_sequentially("bob checked the host")
    bobs_form.get_by_role("button", name="Resolve claim").click()
    expect(heading(bobs)).to_contain_text("failed")
    expect(heading(bobs)).not_to_contain_text("unresolved")
    expect(decide_form(bobs, claim)).to_have_count(0)
    expect(bobs.get_by_role("main")).to_contain_text("Resolved as failed by bob")
    second_browser.screenshot("claim-page-resolved")

    form.get_by_role("button", name="Resolve claim").click()
    expect(page.locator("#messages")).to_contain_text("already resolved as failed by bob")
    expect(decide_form(page, claim)).to_have_count(0)
    decided = page.get_by_role("region", name=f"claim {claim.key}")
    expect(decided).to_contain_text("Decided by bob")
    expect(decided).to_contain_text("bob checked the host")
    expect(page.get_by_role("checkbox", name=f"select claim {claim.key}")).to_have_count(0)
    expect(page.get_by_role("button", name="I'm on it")).to_have_count(0)
    expect(heading(page)).to_contain_text("1 unresolved claim")
    browser.screenshot("queue-decided-meanwhile")
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by) == (ClaimStatus.FAILED, "bob")


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


# --- 7. messages in words; a take over waits for the take to end ---------------------------
def test_taking_a_claim_says_who_and_when_in_words(browser, second_browser, transactional_db):
    claim = factories.crashed(count=1)[0]
    page = signed_in(browser)
    claim_row(page, claim).get_by_role("link", name="Details").click()
    decide_form(page, claim).wait_for()

    bobs = signed_in(second_browser, "bob")
    claim_row(bobs, claim).get_by_role("link", name="Details").click()
    bobs.get_by_role("button", name="I'm on it").click()
    bobs_message = bobs.locator("#messages")
    expect(bobs_message).to_contain_text("You are on claim")
    expect(bobs_message).to_contain_text("merge")  # the step
    assert f"claim {claim.pk} " not in bobs_message.inner_text()

    page.get_by_role("button", name="I'm on it").click()  # her page still offered it
    message = page.locator("#messages")
    expect(message).to_contain_text("taken by bob")
    expect(message).to_contain_text(re.compile(r"taken by bob (just now|\d+ s ago)"))
    assert not ISO_TIME.search(message.inner_text()), message.inner_text()
    assert str(claim.key)[:8] in message.inner_text()
    take_over = page.get_by_role("button", name=re.compile("Take over"))
    expect(take_over).to_be_disabled()
    expect(take_over).to_contain_text(re.compile(r"at \d\d:\d\d"))
    browser.screenshot("claim-taken-by-other")

    with connection.cursor() as cursor:  # time passes: bob's take ended a second ago
        cursor.execute(
            "UPDATE reconciliation_claimtake SET taken_at = now() - interval '31 minutes', "
            "expires_at = now() - interval '1 second'"
        )
    page.reload()
    claim_row(page, claim).get_by_role("link", name="Details").click()
    take = page.get_by_role("button", name="I'm on it")
    expect(take).to_be_enabled()
    take.click()
    expect(message).to_contain_text("You are on claim")
    assert not ISO_TIME.search(message.inner_text()), message.inner_text()


# --- 8. a queue of a few hundred claims -----------------------------------------------------
def test_a_few_hundred_claims_decided_a_page_at_a_time(browser, second_browser, transactional_db):
    factories.crashed(count=300)

    # A viewer sees the claims, and no control to decide them.
    victor = signed_in(second_browser, "victor", "viewers")
    expect(heading(victor)).to_contain_text("300 unresolved claims")
    expect(victor.get_by_role("checkbox")).to_have_count(0)
    expect(victor.get_by_role("form", name="bulk decision")).to_have_count(0)
    second_browser.screenshot("queue-300-viewer")
    victor.set_viewport_size({"width": 390, "height": 900})
    expect(victor.get_by_role("checkbox")).to_have_count(0)
    expect(victor.get_by_role("button", name=re.compile("Preview|Confirm"))).to_have_count(0)

    page = signed_in(browser)
    for width, on_page, left in ((1280, 200, 100), (390, 100, 0)):
        page.set_viewport_size({"width": width, "height": 900})
        expect(queue_rows(page)).to_have_count(on_page)
        bulk = bulk_form(page)
        page.get_by_role("checkbox", name="select all claims").check()
        expect(bulk).to_contain_text(f"{on_page} selected")
        bulk.get_by_label("Outcome").select_option(label="failed: the effect did NOT happen")
        note = bulk.get_by_label("Note (why)")
        note.fill("")
        note.press_sequentially("the code host shows none of them")
        bulk.get_by_role("button", name="Preview…").click()
        confirm = page.get_by_role("button", name=f"Confirm: resolve {on_page} claims")
        expect(confirm).to_be_visible(timeout=15_000)
        if width == 1280:
            browser.screenshot("queue-300-preview")
        confirm.click()
        # The server decides them one transaction each: seconds on a quiet machine, more
        # under load. Wait on the database, then read the page's answer to that request.
        wait_for(
            lambda left=left: Claim.objects.filter(status=ClaimStatus.UNRESOLVED).count() == left,
            timeout=180,
            what=f"{on_page} claims to be decided",
        )
        expect(page.get_by_role("region", name="bulk result")).to_contain_text(
            f"{on_page} claim(s) resolved as failed", timeout=30_000
        )
        # The decided rows are gone; the claims left (the next page's) take their place.
        expect(page.locator("#queue-badge")).to_have_text(str(left))
        expect(heading(page)).to_contain_text(f"{left} unresolved claim")
        expect(queue_rows(page)).to_have_count(left)
        expect(bulk).to_contain_text("0 selected")
        browser.screenshot("queue-300-after", width=width)
    expect(page.get_by_role("region", name="Unresolved claims")).to_contain_text(
        "Nothing to decide"
    )
    assert not Claim.objects.filter(status=ClaimStatus.UNRESOLVED).exists()


# --- 9. accessibility of every state of the queue and of a claim's page --------------------
@pytest.mark.parametrize("role", ["operators", "viewers"])
@pytest.mark.parametrize("width", [1280, 390])
def test_the_queue_and_a_claim_pass_axe_in_every_state(browser, transactional_db, role, width):
    claims = factories.crashed(count=4)
    services.take_claim(claim_id=claims[3].pk, user=make_user("bob", "operators"))
    probed = factories.crashed("merge-change-probed")[0]  # "Check again at …", disabled
    with connection.cursor() as cursor:  # waiting for 2 hours: highlighted as stale
        cursor.execute(
            "UPDATE runs_claim SET unresolved_at = now() - interval '2 hours' WHERE id = %s",
            [probed.pk],
        )
    browser.allow_status(422)  # the refused form
    page = signed_in(browser, "pat", role)
    page.set_viewport_size({"width": width, "height": 900})
    what = f"as {role} at {width} px"
    browser.check_accessibility(f"the queue {what}")

    claim_row(page, claims[0]).get_by_role("link", name="Details").click()
    page.get_by_role("region", name=f"claim {claims[0].key}").wait_for()
    browser.check_accessibility(f"the queue with a claim open {what}")
    claim_row(page, claims[3]).get_by_role("link", name="Details").click()
    page.get_by_role("region", name=f"claim {claims[3].key}").wait_for()
    browser.check_accessibility(f"a claim someone else is on {what}")
    claim_row(page, probed).get_by_role("link", name="Details").click()
    page.get_by_role("region", name=f"claim {probed.key}").wait_for()
    browser.check_accessibility(f"a stale claim with a probe {what}")
    browser.screenshot(f"queue-open-claims-{role}", width=width)

    if role == "operators":
        form = decide_form(page, claims[0])
        form.get_by_label("succeeded: the effect happened").check()
        form.get_by_label("Result, as JSON").press_sequentially("{merge 5}")
        form.get_by_label("Note: how do you know?").press_sequentially("seen")
        form.get_by_role("button", name="Resolve claim").click()
        expect(decide_form(page, claims[0])).to_contain_text("not valid JSON")
        browser.check_accessibility(f"a refused decision {what}")
        browser.screenshot(f"claim-refused-{role}", width=width)

        page.get_by_role("checkbox", name=f"select claim {claims[1].key}").check()
        page.get_by_role("checkbox", name=f"select claim {claims[2].key}").check()
        bulk_form(page).get_by_label("Note (why)").press_sequentially("none merged")
        bulk_form(page).get_by_role("button", name="Preview…").click()
        page.get_by_role("form", name="confirm bulk decision").wait_for()
        browser.check_accessibility(f"the queue with a bulk preview {what}")
        browser.screenshot(f"queue-preview-{role}", width=width)
        page.get_by_role("button", name="Confirm: resolve 2 claims").click()
        page.get_by_role("region", name="bulk result").wait_for()
        browser.check_accessibility(f"the queue with a bulk result {what}")

    browser.goto(f"/reconciliation/claims/{claims[0].pk}/")
    browser.check_accessibility(f"a claim's page {what}")
    if role == "operators":
        form = decide_form(page, claims[0])
        form.get_by_label("failed: the effect did NOT happen").check()
        form.get_by_label("Note: how do you know?").press_sequentially("nothing on the host")
        form.get_by_role("button", name="Resolve claim").click()
        expect(heading(page)).to_contain_text("failed")
        browser.check_accessibility(f"a claim's page once decided {what}")
        browser.screenshot(f"claim-page-decided-{role}", width=width)


# --- 10. the keyboard path through the decide form ------------------------------------------
def test_a_claim_decided_with_the_keyboard_alone(browser, transactional_db):
    claim = factories.crashed(count=1)[0]
    browser.allow_status(422)  # the refused form
    page = signed_in(browser)
    keep_live_region(page)
    region = f"claim {claim.key}"

    tab_to(page, claim_row(page, claim).get_by_role("link", name="Details"))
    page.keyboard.press("Enter")
    form = decide_form(page, claim)
    expect(form).to_be_visible()
    assert focused(page)["within"] == region, focused(page)

    succeeded = form.get_by_label("succeeded: the effect happened")
    failed = form.get_by_label("failed: the effect did NOT happen")
    stops = tab_to(page, succeeded)
    assert all(stop["within"] in (region, f"decide claim {claim.key}") for stop in stops), stops
    page.keyboard.press("ArrowDown")  # arrows move within the outcome radios
    expect(failed).to_be_focused()
    expect(failed).to_be_checked()
    page.keyboard.press("ArrowUp")
    expect(succeeded).to_be_checked()

    page.keyboard.press("Tab")
    result = form.get_by_label("Result, as JSON")
    expect(result).to_be_focused()
    page.keyboard.type('{"merge_id": 5,}')
    page.keyboard.press("Tab")
    note = form.get_by_label("Note: how do you know?")
    expect(note).to_be_focused()
    page.keyboard.type("merge 5 seen on the host")
    page.keyboard.press("Tab")
    reference = form.get_by_label("Reference")
    expect(reference).to_be_focused()
    page.keyboard.type("https://code.example/merges/5")
    page.keyboard.press("Tab")
    expect(form.get_by_role("button", name="Resolve claim")).to_be_focused()
    page.keyboard.press("Enter")

    # The error: focus on the field at fault, described by the message; nothing typed lost.
    form = decide_form(page, claim)
    result = form.get_by_label("Result, as JSON")
    expect(result).to_be_focused()
    expect(result).to_have_accessible_description(re.compile("not valid JSON"))
    expect(result).to_have_value('{"merge_id": 5,}')
    expect(form.get_by_label("Note: how do you know?")).to_have_value("merge 5 seen on the host")
    expect(form.get_by_label("Reference")).to_have_value("https://code.example/merges/5")
    expect(form.get_by_label("succeeded: the effect happened")).to_be_checked()
    browser.screenshot("claim-keyboard-error")

    page.keyboard.press("End")
    page.keyboard.press("Backspace")
    page.keyboard.press("Backspace")
    page.keyboard.type("}")
    tab_to(page, form.get_by_role("button", name="Resolve claim"), limit=4)
    page.keyboard.press("Enter")

    message = page.locator("#messages li")
    expect(message).to_contain_text("resolved as succeeded")
    expect(message).to_be_focused()
    assert live_region_kept(page)
    claim.refresh_from_db()
    assert (claim.status, claim.result) == (ClaimStatus.SUCCEEDED, {"merge_id": 5})


# --- 11. a bulk preview of claims all decided meanwhile ------------------------------------
@pytest.mark.parametrize("width", [1280, 390])
def test_a_preview_of_claims_all_decided_meanwhile_offers_nothing_to_confirm(
    browser, transactional_db, width
):
    claims = factories.crashed(count=3)
    page = signed_in(browser)
    page.set_viewport_size({"width": width, "height": 900})
    for claim in claims[:2]:
        page.get_by_role("checkbox", name=f"select claim {claim.key}").check()
    bulk = bulk_form(page)
    bulk.get_by_label("Note (why)").press_sequentially("none merged")
    for claim in claims[:2]:  # meanwhile bob decides both, elsewhere
        resolve_claim(claim, "failed", actor="bob", note="bob checked the host")
    bulk.get_by_role("button", name="Preview…").click()

    preview = page.get_by_role("region", name="bulk preview")
    expect(preview).to_contain_text("Nothing to resolve: every claim selected is already decided.")
    expect(preview.get_by_role("listitem")).to_have_count(2)
    expect(preview.get_by_role("listitem").first).to_contain_text(
        "already resolved as failed by bob"
    )
    expect(preview.get_by_role("listitem").first).to_contain_text("left out")
    expect(page.get_by_role("button", name=re.compile("Confirm"))).to_have_count(0)
    expect(preview.locator("p").first).to_be_focused()  # its summary, read from there
    # What the preview says is decided leaves the table and the selection.
    for claim in claims[:2]:
        expect(claim_row(page, claim)).to_have_count(0)
    expect(queue_rows(page)).to_have_count(1)
    expect(bulk).to_contain_text("0 selected")
    expect(bulk.get_by_role("button", name="Preview…")).to_be_disabled()
    expect(heading(page)).to_contain_text("1 unresolved claim")
    expect(page.locator("#queue-badge")).to_have_text("1")
    browser.check_accessibility(f"a bulk preview with nothing to resolve, at {width} px")
    browser.screenshot("queue-nothing-to-resolve", width=width)


def test_a_preview_leaves_out_a_claim_decided_meanwhile_and_the_table_drops_it(
    browser, transactional_db
):
    claims = factories.crashed(count=3)
    page = signed_in(browser)
    bulk = bulk_form(page)
    for claim in claims[:2]:
        page.get_by_role("checkbox", name=f"select claim {claim.key}").check()
    bulk.get_by_label("Outcome").select_option(label="failed: the effect did NOT happen")
    bulk.get_by_label("Note (why)").press_sequentially("none merged")
    resolve_claim(claims[0], "failed", actor="bob", note="bob checked the host")  # meanwhile
    bulk.get_by_role("button", name="Preview…").click()

    confirm = page.get_by_role("form", name="confirm bulk decision")
    expect(confirm).to_contain_text("Preview: resolve 1 claim as failed")
    expect(confirm).to_contain_text("1 already decided is left out")
    expect(claim_row(page, claims[0])).to_have_count(0)
    expect(bulk).to_contain_text("1 selected")
    expect(heading(page)).to_contain_text("2 unresolved claims")
    page.get_by_role("button", name="Confirm: resolve 1 claim").click()
    expect(page.get_by_role("region", name="bulk result")).to_contain_text(
        "1 claim(s) resolved as failed"
    )
    expect(queue_rows(page)).to_have_count(1)
    expect(claim_row(page, claims[2])).to_have_count(1)
    expect(page.locator("#queue-badge")).to_have_text("1")


# --- 12. the age filter; to past resolutions and back --------------------------------------
def waited(claim, interval: str) -> None:
    """The claim has been unresolved for `interval` (database clock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_claim SET unresolved_at = now() - %s::interval WHERE id = %s",
            [interval, claim.pk],
        )


def test_waiting_for_at_least_filters_the_queue_and_past_resolutions_is_a_link_away(
    browser, transactional_db
):
    fresh, twenty_minutes, two_hours = factories.crashed(count=3)
    waited(twenty_minutes, "20 minutes")
    waited(two_hours, "2 hours")
    page = signed_in(browser)
    age = page.get_by_label("Waiting for at least")
    expect(queue_rows(page)).to_have_count(3)

    age.select_option(label="1 hour")
    wait_for_address(page, lambda url: url.endswith("/reconciliation/?age=1h"), "age=1h")
    expect(queue_rows(page)).to_have_count(1)
    expect(claim_row(page, two_hours)).to_have_count(1)
    expect(heading(page)).to_contain_text("1 of 3 unresolved claims, filtered")
    age.select_option(label="15 min")
    wait_for_address(page, lambda url: url.endswith("/reconciliation/?age=15m"), "age=15m")
    expect(queue_rows(page)).to_have_count(2)
    expect(claim_row(page, fresh)).to_have_count(0)
    expect(heading(page)).to_contain_text("2 of 3 unresolved claims, filtered")
    age.select_option(label="1 day")
    expect(page.get_by_role("region", name="Unresolved claims")).to_contain_text(
        "Nothing to decide with these filters"
    )
    age.select_option(label="any time")
    wait_for_address(page, lambda url: url.endswith("/reconciliation/"), "no filter")
    expect(queue_rows(page)).to_have_count(3)
    expect(heading(page)).to_contain_text("3 unresolved claims")

    page.get_by_role("link", name="Past resolutions").click()
    wait_for_address(page, lambda url: url.endswith("/reconciliation/history/"), "the history")
    expect(page.get_by_role("heading", name="Past resolutions", level=1)).to_be_visible()
    page.get_by_role("link", name="← Reconciliation queue").click()
    wait_for_address(page, lambda url: url.endswith("/reconciliation/"), "the queue")
    expect(queue_rows(page)).to_have_count(3)


# --- 13. Hide; I'm on it and Release ---------------------------------------------------
def test_hide_folds_a_claim_and_release_gives_it_back(browser, second_browser, transactional_db):
    claim = factories.crashed(count=1)[0]
    page = signed_in(browser)
    row = claim_row(page, claim)
    details = row.get_by_role("link", name="Details")
    details.click()
    region = page.get_by_role("region", name=f"claim {claim.key}")
    expect(region).to_be_visible()
    hide = row.get_by_role("link", name="Hide")
    expect(hide).to_have_attribute("aria-expanded", "true")

    hide.click()
    expect(region).to_have_count(0)
    # Focus goes back to the link that opens it again, which says it is closed.
    expect(details).to_be_focused()
    expect(details).to_have_attribute("aria-expanded", "false")
    page.keyboard.press("Enter")
    expect(region).to_be_visible()

    page.get_by_role("button", name="I'm on it").click()
    release = region.get_by_role("button", name="Release")
    expect(release).to_be_focused()
    expect(region).to_contain_text("olivia, who took it")
    expect(row.locator("td").nth(9)).to_have_text("olivia")  # the "on it" column
    bobs = signed_in(second_browser, "bob")
    expect(claim_row(bobs, claim).locator("td").nth(9)).to_have_text("olivia")
    browser.screenshot("claim-taken-by-me", width=390)

    release.click()
    message = page.locator("#messages")
    expect(message).to_contain_text(f"You released claim {claim.key[:8]}")
    take = region.get_by_role("button", name="I'm on it")
    expect(take).to_be_focused()
    expect(region.locator("dd").nth(5)).to_have_text("nobody")
    expect(row.locator("td").nth(9)).to_have_text("—")
    # Someone else sees it free to take.
    bobs.reload()
    expect(claim_row(bobs, claim).locator("td").nth(9)).to_have_text("—")
    claim_row(bobs, claim).get_by_role("link", name="Details").click()
    bobs.get_by_role("button", name="I'm on it").click()
    expect(bobs.locator("#messages")).to_contain_text("You are on claim")


# --- 14. Check again: the probe runs now, and the page says what it found ---------------
def test_check_again_runs_the_probe_and_says_what_it_found(browser, transactional_db):
    applied = factories.crashed_merge(change_id=5, workflow="merge-change-probed")
    not_applied = factories.crashed_merge(change_id=6, workflow="merge-change-probed")
    CodeHost().merge(change_id=5, run_id=str(applied.run_id))  # this merge did happen
    Claim.objects.update(probe_after=Now())  # the grace period is over
    page = signed_in(browser)
    keep_live_region(page)

    claim_row(page, applied).get_by_role("link", name="Details").click()
    check = page.get_by_role("button", name="Check again (run the probe)")
    expect(check).to_be_enabled()
    browser.check_accessibility("a claim whose probe may run again")
    check.click()
    message = page.locator("#messages li")
    expect(message).to_contain_text(
        "The probe found the effect applied: the claim is resolved as succeeded"
    )
    expect(message).to_be_focused()
    assert live_region_kept(page)
    expect(claim_row(page, applied)).to_have_count(0)  # decided: off the queue
    expect(heading(page)).to_contain_text("1 unresolved claim")
    expect(page.locator("#queue-badge")).to_have_text("1")

    claim_row(page, not_applied).get_by_role("link", name="Details").click()
    page.get_by_role("button", name="Check again (run the probe)").click()
    expect(message).to_contain_text("resolved as failed")
    expect(claim_row(page, not_applied)).to_have_count(0)
    expect(page.locator("#queue-badge")).to_have_text("0")
    browser.screenshot("queue-after-check-again")
    applied.refresh_from_db()
    not_applied.refresh_from_db()
    assert (applied.status, not_applied.status) == (ClaimStatus.SUCCEEDED, ClaimStatus.FAILED)


# --- 15. the run's links, in the row and in the detail --------------------------------------
def test_the_run_links_of_a_claim_open_its_run(browser, transactional_db):
    claim = factories.crashed(count=1)[0]
    page = signed_in(browser)
    run_page = f"/runs/{claim.run_id}/"
    claim_row(page, claim).get_by_role("link", name=f"{str(claim.run_id)[:8]}…").click()
    wait_for_address(page, lambda url: url.endswith(run_page), run_page)
    expect(heading(page)).to_have_text("merge-change@1 needs reconciliation")
    page.go_back()

    claim_row(page, claim).get_by_role("link", name="Details").click()
    region = page.get_by_role("region", name=f"claim {claim.key}")
    region.get_by_role("link", name=f"merge-change@1 {str(claim.run_id)[:8]}…").click()
    wait_for_address(page, lambda url: url.endswith(run_page), run_page)
    expect(heading(page)).to_have_text("merge-change@1 needs reconciliation")


# --- 16. the folded panels: events around a claim, a payload, the runs a bulk resolved ------
@pytest.mark.parametrize("width", [1280, 390])
def test_the_folded_panels_open_and_pass_axe(browser, transactional_db, width):
    claims = factories.crashed(count=3)
    page = signed_in(browser)
    page.set_viewport_size({"width": width, "height": 900})
    claim_row(page, claims[0]).get_by_role("link", name="Details").click()
    region = page.get_by_role("region", name=f"claim {claims[0].key}")
    events = region.get_by_role("group").filter(has_text="Events around this claim")
    expect(events).not_to_have_attribute("open", "")
    region.get_by_text("Events around this claim").click()
    expect(events).to_have_attribute("open", "")
    crashed = events.get_by_role("listitem").filter(has_text="attempt_crashed")
    expect(crashed).to_be_visible()
    browser.check_accessibility(f"the events around a claim, at {width} px")
    crashed.get_by_text("payload").click()
    expect(crashed.locator("pre")).to_be_visible()
    expect(crashed.locator("pre")).to_contain_text('"worker": "worker-0"')
    browser.check_accessibility(f"an event's payload, at {width} px")
    browser.screenshot("queue-claim-events", width=width)

    for claim in claims[1:]:
        page.get_by_role("checkbox", name=f"select claim {claim.key}").check()
    bulk_form(page).get_by_label("Note (why)").press_sequentially("none merged")
    bulk_form(page).get_by_role("button", name="Preview…").click()
    page.get_by_role("button", name="Confirm: resolve 2 claims").click()
    result = page.get_by_role("region", name="bulk result")
    result.get_by_text("Resolved: 2 claims, and their runs").click()
    runs = result.get_by_role("listitem")
    expect(runs).to_have_count(2)
    expect(runs.first).to_contain_text("is succeeded")
    browser.check_accessibility(f"the runs a bulk decision resolved, at {width} px")
    browser.screenshot("queue-bulk-result-runs", width=width)
    result.get_by_role("link", name=str(claims[1].run_id)[:8]).click()
    run_page = f"/runs/{claims[1].run_id}/"
    wait_for_address(page, lambda url: url.endswith(run_page), run_page)


# --- 17. paging back to the claims that waited longest ------------------------------------
def test_older_first_pages_back_to_the_claims_waiting_longest(
    browser, transactional_db, monkeypatch
):
    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    claims = factories.crashed(count=3)
    page = signed_in(browser)
    expect(queue_rows(page)).to_have_count(2)
    pages = page.get_by_role("navigation", name="pages")
    expect(pages).to_contain_text("page 1 of 2")
    pages.get_by_role("link", name="newer →").click()
    wait_for_address(page, lambda url: url.endswith("?page=2"), "page 2")
    expect(queue_rows(page)).to_have_count(1)
    expect(claim_row(page, claims[2])).to_have_count(1)
    pages.get_by_role("link", name="← older first").click()
    wait_for_address(page, lambda url: url.endswith("?page=1"), "page 1")
    expect(queue_rows(page)).to_have_count(2)
    expect(claim_row(page, claims[0])).to_have_count(1)
    expect(pages).to_contain_text("page 1 of 2")
    expect(pages.get_by_role("link", name="← older first")).to_have_count(0)


# --- 18. a claim's own page: take, release, back to the queue ------------------------------
def test_on_a_claims_own_page_im_on_it_release_and_back_to_the_queue(browser, transactional_db):
    claim = factories.crashed(count=1)[0]
    page = signed_in(browser, path=f"/reconciliation/claims/{claim.pk}/")
    expect(heading(page)).to_contain_text("unresolved")
    region = page.get_by_role("region", name=f"claim {claim.key}")

    page.get_by_role("button", name="I'm on it").click()
    release = region.get_by_role("button", name="Release")
    expect(release).to_be_focused()
    expect(page.locator("#messages")).to_contain_text("You are on claim")
    expect(region).to_contain_text("olivia, who took it")
    expect(heading(page)).to_contain_text("unresolved")
    browser.check_accessibility("a claim's page, taken by me")
    browser.screenshot("claim-page-taken", width=390)

    release.click()
    expect(page.locator("#messages")).to_contain_text("You released claim")
    expect(region.get_by_role("button", name="I'm on it")).to_be_focused()
    expect(region.locator("dd").nth(5)).to_have_text("nobody")

    page.get_by_role("link", name="← Reconciliation queue").click()
    wait_for_address(page, lambda url: url.endswith("/reconciliation/"), "the queue")
    expect(claim_row(page, claim)).to_have_count(1)
    expect(claim_row(page, claim).locator("td").nth(9)).to_have_text("—")
