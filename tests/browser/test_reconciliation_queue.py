"""The reconciliation queue and a claim's own page in a real browser, used the way an
operator uses them: the claims grouped by cause and narrowed to one, opening a claim,
deciding it with the mouse or the keyboard, losing a race to a colleague, and a queue of
a few hundred claims (the decision over all of them, with a worker: test_incident.py).
Claims are made by tests/support/factories.py (no workers needed)."""

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


def group_of(page, title: str):
    """The incident group whose heading starts with `title` ("3 claims · merge-change")."""
    heading = page.get_by_role("heading", name=re.compile("^" + re.escape(title)))
    return page.get_by_role("listitem").filter(has=heading)


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


# --- 1. the claims by cause: narrowed to one, and back ------------------------------------
def test_show_these_claims_narrows_the_queue_to_one_cause_and_back(browser, transactional_db):
    timeouts = factories.crashed(count=2)
    for claim in timeouts:
        Claim.objects.filter(pk=claim.pk).update(error="TimeoutError: host timed out after 30 s")
    died = factories.crashed(count=1)[0]
    page = signed_in(browser)
    expect(queue_rows(page)).to_have_count(3)
    group = group_of(page, "2 claims · merge-change · merge")
    expect(group).to_contain_text("TimeoutError: host timed out after # s")

    group.get_by_role("link", name="Show these claims").click()
    narrowed = "/reconciliation/?workflow=merge-change&step=merge&cause="
    wait_for_address(page, lambda url: narrowed in url, narrowed)
    expect(queue_rows(page)).to_have_count(2)
    expect(claim_row(page, died)).to_have_count(0)
    notice = page.get_by_role("region", name="narrowed to one cause")
    expect(notice).to_contain_text("Only the claims of step merge whose error reads")
    expect(heading(page)).to_contain_text("2 of 3 unresolved claims, filtered")
    expect(page.get_by_role("link", name="Decide all 2 matching…")).to_be_visible()
    expect(page.get_by_role("link", name="Pause this step…").first).to_be_visible()
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        browser.check_accessibility(f"the queue narrowed to one cause at {width} px")
    page.set_viewport_size({"width": 1280, "height": 900})
    browser.screenshot("queue-one-cause")
    browser.screenshot("queue-one-cause", width=390)

    # Changing another filter keeps the cause.
    page.get_by_label("Waiting for at least").select_option(label="15 min")
    wait_for_address(page, lambda url: "age=15m" in url and "cause=" in url, "age and cause")
    expect(page.get_by_role("region", name="Unresolved claims")).to_contain_text(
        "No claim matches these filters; 3 others wait"
    )
    page.go_back()
    wait_for_address(page, lambda url: narrowed in url and "age=" not in url, narrowed)
    expect(queue_rows(page)).to_have_count(2)
    notice.get_by_role("link", name="Show every step and cause").click()
    wait_for_address(
        page, lambda url: url.endswith("/reconciliation/?workflow=merge-change"), "workflow"
    )
    expect(queue_rows(page)).to_have_count(3)
    page.go_back()
    wait_for_address(page, lambda url: narrowed in url, narrowed)
    expect(queue_rows(page)).to_have_count(2)
    page.go_forward()
    wait_for_address(page, lambda url: "cause=" not in url, "the cause cleared")
    expect(queue_rows(page)).to_have_count(3)


# --- 2. a group's pause and decide links; the skip link; the groups stay current ----------
def test_a_groups_links_open_the_pause_form_and_the_decision_with_its_context(
    browser, transactional_db
):
    claims = factories.crashed(count=3)
    page = signed_in(browser)

    # The first Tab stop skips the navigation.
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to the content")
    expect(skip).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()

    # The groups follow decisions made elsewhere without a reload.
    group = group_of(page, "3 claims · merge-change · merge")
    resolve_claim(claims[0], "failed", actor="bob", note="bob checked the host")
    page.evaluate("htmx.trigger('#incident-groups', 'poll-now')")
    expect(group_of(page, "2 claims · merge-change · merge")).to_be_visible()
    expect(heading(page)).to_contain_text("2 unresolved claims")

    # A colleague's take shows on the row at the next poll, before anyone acts.
    services.take_claim(claim_id=claims[1].pk, user=make_user("bob", "operators"))
    page.evaluate("htmx.trigger('#incident-groups', 'poll-now')")
    expect(claim_row(page, claims[1]).locator("td").nth(8)).to_have_text("bob")
    expect(group_of(page, "2 claims · merge-change · merge")).to_contain_text(
        "1 taken by an operator"
    )

    group = group_of(page, "2 claims · merge-change · merge")
    group.get_by_role("link", name="Pause this workflow…").click()
    wait_for_address(page, lambda url: "/pauses/?workflow=merge-change#" in url, "pause")
    expect(page.get_by_label("Workflow", exact=True)).to_have_value("merge-change")
    expect(page.get_by_label("Step (optional)")).to_have_value("")  # all of its steps
    page.go_back()
    group = group_of(page, "2 claims · merge-change · merge")
    group.get_by_role("link", name="Pause this step…").click()
    wait_for_address(page, lambda url: "/pauses/?workflow=merge-change&step=merge" in url, "pause")
    expect(page.get_by_label("Workflow", exact=True)).to_have_value("merge-change")
    expect(page.get_by_label("Step (optional)")).to_have_value("merge")
    page.go_back()
    wait_for_address(page, lambda url: url.split("#")[0].endswith("/reconciliation/"), "the queue")
    group_of(page, "2 claims · merge-change · merge").get_by_role(
        "link", name="Decide these…"
    ).click()
    expect(page.get_by_role("heading", name="Decide 2 claims")).to_be_visible()
    decide = page.get_by_role("form", name="decide every matching claim")
    # No outcome is chosen for the operator; sending none is refused beside the field.
    browser.allow_status(422)
    decide.get_by_label(re.compile("^Note")).fill("host was down")
    decide.get_by_role("button", name="Preview…").click()
    decide = page.get_by_role("form", name="decide every matching claim")
    expect(decide).to_contain_text("choose what happened to the effects: succeeded or failed")
    expect(decide.get_by_label(re.compile("^Note"))).to_have_value("host was down")
    browser.check_accessibility("a decision refused for want of an outcome")
    page.go_back()
    page.go_back()
    wait_for_address(page, lambda url: url.split("#")[0].endswith("/reconciliation/"), "the queue")
    page.go_forward()
    expect(page.get_by_role("heading", name="Decide 2 claims")).to_be_visible()


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

    page.get_by_label("Workflow").select_option(label="merge-change")
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
def test_a_few_hundred_claims_one_decision_away(browser, second_browser, transactional_db):
    factories.crashed(count=300)

    # A viewer sees the claims, and no control to decide them.
    victor = signed_in(second_browser, "victor", "viewers")
    expect(heading(victor)).to_contain_text("300 unresolved claims")
    expect(victor.get_by_role("link", name=re.compile("^Decide"))).to_have_count(0)
    expect(victor.get_by_role("link", name=re.compile("^Pause this"))).to_have_count(0)
    second_browser.screenshot("queue-300-viewer")
    victor.set_viewport_size({"width": 390, "height": 900})
    expect(victor.get_by_role("link", name=re.compile("^Decide"))).to_have_count(0)

    page = signed_in(browser)
    expect(queue_rows(page)).to_have_count(200)  # a page; the decision takes every one
    expect(group_of(page, "300 claims · merge-change · merge")).to_be_visible()
    page.get_by_role("link", name="Decide all 300 unresolved…").click()
    form = page.get_by_role("form", name="decide every matching claim")
    expect(form).to_contain_text("What happened to these 300 effects?")
    form.get_by_label("failed: the effect did NOT happen").check()
    form.get_by_label(re.compile("^Note")).fill("the code host shows none of them")
    form.get_by_role("button", name="Preview…").click()
    confirm = page.get_by_role("button", name="Confirm: resolve 300 claims as failed")
    expect(confirm).to_be_in_viewport()
    browser.screenshot("queue-300-preview")
    assert Claim.objects.filter(status=ClaimStatus.UNRESOLVED).count() == 300  # nothing yet


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

        browser.goto("/reconciliation/decide/?workflow=merge-change")
        browser.check_accessibility(f"the decision's form {what}")
        form = page.get_by_role("form", name="decide every matching claim")
        form.get_by_label("failed: the effect did NOT happen").check()
        form.get_by_label(re.compile("^Note")).press_sequentially("none merged")
        form.get_by_role("button", name="Preview…").click()
        page.get_by_role("heading", name=re.compile("^Preview: resolve")).wait_for()
        browser.check_accessibility(f"the decision's preview {what}")
        browser.screenshot(f"decide-preview-{role}", width=width)

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


# --- 11. a decision over claims all decided meanwhile ------------------------------------
@pytest.mark.parametrize("width", [1280, 390])
def test_a_preview_of_claims_all_decided_meanwhile_offers_nothing_to_confirm(
    browser, transactional_db, width
):
    claims = factories.crashed(count=2)
    page = signed_in(browser, path="/reconciliation/decide/?workflow=merge-change")
    page.set_viewport_size({"width": width, "height": 900})
    form = page.get_by_role("form", name="decide every matching claim")
    form.get_by_label("failed: the effect did NOT happen").check()
    form.get_by_label(re.compile("^Note")).press_sequentially("none merged")
    for claim in claims:  # meanwhile bob decides both, elsewhere
        resolve_claim(claim, "failed", actor="bob", note="bob checked the host")
    form.get_by_role("button", name="Preview…").click()

    expect(page.get_by_text("No claim of this filter is unresolved any more")).to_be_visible()
    expect(page.get_by_role("button", name=re.compile("Confirm"))).to_have_count(0)
    browser.check_accessibility(f"a preview with nothing to decide, at {width} px")
    browser.screenshot("decide-nothing-left", width=width)
    page.get_by_role("link", name="Back to the queue").click()
    expect(page.locator("#queue-badge")).to_have_text("0")


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
        "No claim matches these filters; 3 others wait"
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
    expect(row.locator("td").nth(8)).to_have_text("olivia")  # the "on it" column
    bobs = signed_in(second_browser, "bob")
    expect(claim_row(bobs, claim).locator("td").nth(8)).to_have_text("olivia")
    browser.screenshot("claim-taken-by-me", width=390)

    release.click()
    message = page.locator("#messages")
    expect(message).to_contain_text(f"You released claim {claim.key[:8]}")
    take = region.get_by_role("button", name="I'm on it")
    expect(take).to_be_focused()
    expect(region.locator("dd").nth(5)).to_have_text("nobody")
    expect(row.locator("td").nth(8)).to_have_text("—")
    # Someone else sees it free to take.
    bobs.reload()
    expect(claim_row(bobs, claim).locator("td").nth(8)).to_have_text("—")
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


# --- 16. the folded panels: events around a claim, a payload -----------------------------
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

    # Deciding the page's claims empties its table: the next ones take their place, and
    # the page links go with the second page, which is no more.
    for claim in claims[:2]:
        claim_row(page, claim).get_by_role("link", name="Details").click()
        form = decide_form(page, claim)
        form.get_by_label("failed: the effect did NOT happen").check()
        form.get_by_label("Note: how do you know?").fill("nothing on the host")
        form.get_by_role("button", name="Resolve claim").click()
        expect(claim_row(page, claim)).to_have_count(0)
    expect(queue_rows(page)).to_have_count(1)
    expect(claim_row(page, claims[2])).to_have_count(1)
    expect(page.get_by_role("navigation", name="pages")).to_have_count(0)


# --- 18. a claim's own page: take, release, back to the queue ------------------------------
def test_on_a_claims_own_page_im_on_it_release_and_back_to_the_queue(browser, transactional_db):
    claim = factories.crashed(count=1)[0]
    page = signed_in(browser, path=f"/reconciliation/claims/{claim.pk}/")
    expect(heading(page)).to_contain_text("unresolved")
    region = page.get_by_role("region", name=f"claim {claim.key}")
    # Its row is read with the queue's column names.
    table = page.get_by_role("region", name="The claim")
    expect(table.locator("thead").first.get_by_role("columnheader")).to_have_count(10)
    expect(table.get_by_role("columnheader", name="why unresolved")).to_be_visible()

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
    expect(claim_row(page, claim).locator("td").nth(8)).to_have_text("—")


# --- 19. a claim's business key leads to the runs that asked for the same -------------------
def test_a_claim_links_to_the_runs_of_the_same_business_key(browser, transactional_db):
    claim = factories.crashed_merge(change_id=301)
    again = factories.crashed_merge(change_id=301, workflow="merge-change-probed")
    page = signed_in(browser)
    claim_row(page, claim).get_by_role("link", name="Details").click()
    region = page.get_by_role("region", name=f"claim {claim.key}")
    region.get_by_role("link", name="Runs with the same change_id").click()
    listed = "/runs/?field=change_id&value=301"
    wait_for_address(page, lambda url: url.endswith(listed), listed)
    for run_id in (claim.run_id, again.run_id):
        expect(page.get_by_role("link", name=f"{str(run_id)[:8]}…", exact=True)).to_be_visible()
    browser.check_accessibility("the runs of one business key, from a claim")
    page.go_back()
    wait_for_address(page, lambda url: url.split("#")[0].endswith("/reconciliation/"), "the queue")
    expect(claim_row(page, claim)).to_have_count(1)
