"""The run page's controls in a real browser, each used as a person uses it, without
workers (runs/testing.py's run_inline drives a run to its end in-process; a retried
step then stays queued, which is what the page shows): Retry now, a retry that became
impossible meanwhile, the dialogs from the keyboard, the event log's filter, pages and
payloads, the folded details of steps and batches, the copy button, the links to a
claim and to the queue, and what a viewer sees."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from playwright.sync_api import expect

from runs import engine
from runs.models import Signal
from runs.principals import Principal, user_principal
from runs.testing import run_inline
from runs.web import queries
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.support import factories

pytestmark = pytest.mark.browser


def signed_in(browser: Any, path: str, name: str = "olivia", role: str = "operators") -> Any:
    make_user(name, role)
    browser.login(name, PASSWORD)
    return browser.goto(path)


def heading(page: Any) -> Any:
    return page.get_by_role("heading", level=1)


def events(page: Any) -> Any:
    """The event log's rows."""
    return page.get_by_role("region", name="Events").locator("tbody tr")


def query_of(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


# --- retrying -----------------------------------------------------------------------
def test_retry_now_reopens_the_run_and_queues_the_failed_step(browser, transactional_db):
    failed = run_inline("fork-fail")
    page = signed_in(browser, f"/runs/{failed.id}/")
    step = page.locator("#step-doomed_branch")
    expect(step).to_contain_text("failed")
    page.get_by_role("button", name="Retry failed step…").click()
    dialog = page.get_by_role("dialog", name="Retry doomed_branch?")
    expect(dialog).to_contain_text("Each step below gets a new attempt")
    expect(dialog).to_contain_text("No external effect of this run has happened yet.")
    browser.screenshot("run-retry-dialog", width=390)

    dialog.get_by_role("button", name="Retry now").click()
    message = page.locator("#messages")
    expect(message).to_contain_text(
        "Retrying doomed_branch: the run is running again; effects that already happened "
        "are not repeated."
    )
    expect(dialog).to_have_count(0)  # nothing left to retry
    expect(heading(page)).to_have_text("fork-fail@1 running")
    expect(step).to_contain_text("queued")
    expect(page.get_by_role("button", name="Retry failed step…")).to_have_count(0)
    expect(page.get_by_role("button", name="Cancel run…")).to_be_visible()
    expect(events(page).filter(has_text="run_reopened")).to_contain_text("olivia")
    browser.check_accessibility("the run page after a retry")
    browser.screenshot("run-retried")
    browser.screenshot("run-retried", width=390)


def test_a_retry_made_impossible_meanwhile_says_why_and_closes(browser, transactional_db):
    failed = run_inline("fork-fail")
    page = signed_in(browser, f"/runs/{failed.id}/")
    opener = page.get_by_role("button", name="Retry failed step…")
    # Meanwhile a colleague retried it from the API: the run is no longer failed.
    engine.retry_steps(run_id=failed.id, step_keys=["doomed_branch"], actor="bob")
    opener.click()
    dialog = page.get_by_role("dialog", name="Retry doomed_branch?")
    error = dialog.get_by_role("alert")
    expect(error).to_contain_text("running")
    expect(dialog.get_by_role("button", name="Retry now")).to_have_count(0)
    browser.check_accessibility("the retry dialog saying why not")
    browser.screenshot("run-retry-impossible", width=390)
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    expect(opener).to_be_focused()  # back where the person was


# --- the dialogs from the keyboard ------------------------------------------------------
def test_escape_closes_each_dialog_and_focus_returns_to_its_button(browser, transactional_db):
    waiting = run_inline("submitter-nudge")  # cancel and signal
    page = signed_in(browser, f"/runs/{waiting.id}/")
    for opener_name, dialog_name, first_field in (
        ("Cancel run…", "Cancel this run?", "Reason (recorded with your name)"),
        ("Send signal “nudge”…", "Send signal “nudge”?", "Payload (JSON, optional)"),
    ):
        opener = page.get_by_role("button", name=opener_name)
        opener.focus()
        page.keyboard.press("Enter")
        dialog = page.get_by_role("dialog", name=dialog_name)
        expect(dialog).to_be_visible()
        field = dialog.get_by_label(first_field)
        expect(field).to_be_focused()  # the first thing to fill in
        page.keyboard.type("typed, then thought better of it")
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
        expect(opener).to_be_focused()
    expect(heading(page)).to_have_text("submitter-nudge@1 waiting")  # nothing was sent
    assert not Signal.objects.filter(run=waiting).exists()

    failed = run_inline("fork-fail")
    browser.goto(f"/runs/{failed.id}/")
    opener = page.get_by_role("button", name="Retry failed step…")
    opener.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Retry doomed_branch?")
    retry_now = dialog.get_by_role("button", name="Retry now")
    expect(retry_now).to_be_visible()
    page.keyboard.press("Tab")  # the keyboard stays inside the open dialog
    assert dialog.evaluate("d => d.contains(document.activeElement)")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(opener).to_be_focused()
    expect(heading(page)).to_have_text("fork-fail@1 failed")


# --- the event log ---------------------------------------------------------------------
def test_the_event_log_filtered_shown_whole_paged_and_a_payload_read(
    browser, transactional_db, monkeypatch
):
    monkeypatch.setattr(queries, "EVENTS_PER_PAGE", 4)
    run = run_inline("migrate-records", {"count": 20, "batch_size": 10})
    page = signed_in(browser, f"/runs/{run.id}/")
    log = page.get_by_role("region", name="history")
    pager = log.get_by_role("navigation", name="pages")
    expect(events(page)).to_have_count(4)
    expect(events(page).first).to_contain_text("run_submitted")
    total = int(re.search(r"\((\d+) events\)", log.locator("h2").inner_text()).group(1))
    last_page = -(-total // 4)
    expect(pager).to_contain_text(f"page 1 of {last_page}")

    pager.get_by_role("link", name="later →").click()
    wait_for_address(page, lambda url: query_of(url) == {"page": "2"}, "events page 2")
    expect(pager).to_contain_text(f"page 2 of {last_page}")
    expect(events(page).first).not_to_contain_text("run_submitted")
    pager.get_by_role("link", name="← earlier").click()
    wait_for_address(page, lambda url: query_of(url) == {"page": "1"}, "events page 1")
    expect(events(page).first).to_contain_text("run_submitted")

    event_type = log.get_by_label("Event type")
    event_type.select_option("step_succeeded")
    wait_for_address(page, lambda url: query_of(url) == {"type": "step_succeeded"}, "the type")
    expect(events(page)).to_have_count(4)
    expect(log.locator("h2")).to_contain_text("step_succeeded of")
    show_all = log.get_by_role("link", name="show all")
    show_all.click()
    wait_for_address(page, lambda url: query_of(url) == {}, "no filter")
    expect(event_type).to_have_value("")
    expect(show_all).to_have_count(0)
    expect(log.locator("h2")).to_have_text(f"History ({total} events)")

    submitted = events(page).filter(has_text="run_submitted")
    payload = submitted.locator("pre")
    expect(payload).to_be_hidden()
    submitted.get_by_text("payload").click()
    expect(payload).to_be_visible()
    expect(payload).to_contain_text('"count": 20')
    browser.check_accessibility("the run page with an event's payload open")
    browser.screenshot("run-event-payload", width=390)


# --- folded details: every batch, the run's result, a step's result --------------------
@pytest.mark.parametrize("width", [1280, 390])
def test_the_folded_details_of_a_run_open_and_pass_axe(browser, transactional_db, width):
    run = run_inline("migrate-records", {"count": 40, "batch_size": 10})
    assert run.result is not None
    page = signed_in(browser, f"/runs/{run.id}/")
    page.set_viewport_size({"width": width, "height": 900})

    result = page.get_by_role("region", name="input").get_by_role("group")
    expect(result.locator("pre")).to_be_hidden()
    result.get_by_text("Result").click()
    expect(result.locator("pre")).to_be_visible()
    expect(result.locator("pre")).to_have_text(json.dumps(run.result, indent=2, sort_keys=True))

    step = page.locator("#step-list_records")
    step.get_by_text("result").click()
    expect(step.locator("pre")).to_be_visible()

    batches = page.locator("#step-migrate").get_by_role("group").filter(has_text="every batch")
    expect(batches.get_by_role("table")).to_be_hidden()
    batches.get_by_text("every batch (4)").click()
    rows = batches.get_by_role("table").locator("tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.first).to_contain_text("migrate[0]")
    expect(rows.first).to_contain_text("10/10")
    browser.check_accessibility(f"the run page with its details open at {width} px")
    browser.screenshot("run-details-open", width=width)


# --- the copy button -------------------------------------------------------------------
def test_the_copy_button_copies_the_run_id_and_says_so(browser, transactional_db):
    run = run_inline("pure-chain")
    browser.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = signed_in(browser, f"/runs/{run.id}/")
    copy = page.get_by_role("button", name=f"copy {run.id}")
    copy.click()
    said = page.get_by_role("status").filter(has_text="Copied")
    expect(said).to_have_text(f"Copied {run.id}")
    expect(copy).to_have_text("copied")
    assert page.evaluate("navigator.clipboard.readText()") == str(run.id)
    expect(copy).to_have_text("copy")  # back, a moment later


# --- the links to a claim and to the queue ---------------------------------------------
def test_a_run_waiting_for_a_decision_links_to_the_claim_and_to_the_queue(
    browser, transactional_db
):
    claim = factories.crashed(count=1)[0]
    page = signed_in(browser, f"/runs/{claim.run_id}/")
    notice = page.locator(".notice").filter(has_text="This run waits for a decision")
    expect(notice).to_contain_text("This run waits for a decision on 1 claim below.")

    # The steps table's "decide": the claim's own page.
    page.locator("#step-merge").get_by_role("link", name="decide").click()
    claim_page = f"/reconciliation/claims/{claim.pk}/"
    wait_for_address(page, lambda url: urlsplit(url).path == claim_page, claim_page)
    expect(heading(page)).to_contain_text("unresolved")
    expect(page.get_by_role("form", name=f"decide claim {claim.key}")).to_be_visible()
    page.go_back()

    notice.get_by_role("link", name="Open the reconciliation queue").click()
    wait_for_address(page, lambda url: urlsplit(url).path == "/reconciliation/", "the queue")
    expect(heading(page)).to_contain_text("1 unresolved claim")


# --- an approval and its submitter ----------------------------------------------------
@pytest.mark.parametrize("width", [1280, 390])
def test_an_approval_says_why_to_its_submitter_and_another_operator_sends_it(
    browser, second_browser, transactional_db, width
):
    """The engine refuses an approval (four eyes) from the run's submitter: the page
    offers it no button, says why, and offers the button to another operator."""
    run = engine.submit_run(
        workflow="agent-refund",
        input={"ticket": 3, "amount": 10},
        by=Principal(user_principal("olivia"), "web"),
    )
    factories.run_queued(run)  # proposes, holds the funds, then waits for the approval
    page = signed_in(browser, f"/runs/{run.id}/", "olivia")
    page.set_viewport_size({"width": width, "height": 900})
    actions = page.locator("#run-actions")
    expect(actions).to_contain_text("You submitted this run: another operator approves it")
    expect(page.get_by_role("button", name=re.compile("signal"))).to_have_count(0)
    expect(page.get_by_role("button", name="Cancel run…")).to_be_visible()
    browser.check_accessibility(f"an approval's run page for its submitter at {width} px")
    browser.screenshot("run-approval-own-run", width=width)

    oscar = signed_in(second_browser, f"/runs/{run.id}/", "oscar")
    expect(oscar.locator("#run-actions")).not_to_contain_text("You submitted this run")
    oscar.get_by_role("button", name="Send signal “approval”…").click()
    dialog = oscar.get_by_role("dialog", name="Send signal “approval”?")
    dialog.get_by_label("Payload (JSON, optional)").fill('{"approved": true}')
    dialog.get_by_role("button", name="Send the signal").click()
    expect(oscar.locator("#messages")).to_contain_text("Signal 'approval' sent")
    assert Signal.objects.get(run=run).actor == "oscar"


# --- a viewer --------------------------------------------------------------------------
@pytest.mark.parametrize("width", [1280, 390])
def test_a_viewer_sees_a_run_and_no_operation_on_it(browser, transactional_db, width):
    waiting = run_inline("submitter-nudge")
    failed = run_inline("fork-fail")
    claim = factories.crashed(count=1)[0]
    page = signed_in(browser, f"/runs/{waiting.id}/", "victor", "viewers")
    page.set_viewport_size({"width": width, "height": 900})
    for run_id, status in (
        (waiting.id, "waiting"),
        (failed.id, "failed"),
        (claim.run_id, "needs reconciliation"),
    ):
        browser.goto(f"/runs/{run_id}/")
        expect(heading(page)).to_contain_text(status)
        expect(page.locator("#run-actions")).to_be_empty()
        expect(page.get_by_role("button", name=re.compile("Cancel|signal|Retry"))).to_have_count(0)
        expect(page.get_by_role("dialog")).to_have_count(0)
        browser.check_accessibility(f"a {status} run's page for a viewer at {width} px")
    browser.screenshot("run-viewer", width=width)
    # A viewer may read the claim (not decide it): the link says so.
    expect(page.get_by_role("link", name="decide")).to_have_count(0)
    page.locator("#step-merge").get_by_role("link", name="see the claim").click()
    expect(page.get_by_role("main")).to_contain_text("deciding it needs the operator role")
