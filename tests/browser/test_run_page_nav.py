"""The run page in a real browser, without workers (runs/testing.py's run_inline drives
each run to its end in-process): its URL keeps exactly the view in effect (the batches
shown, the event type), Back and Forward, and what its operations offer."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.db.models.functions import Now
from playwright.sync_api import expect

from runs import engine
from runs.models import Run, Signal
from runs.testing import run_inline
from tests.browser.conftest import Browser, wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.support import factories

pytestmark = pytest.mark.browser


def query_of(url: str) -> list[tuple[str, str]]:
    """The URL's parameters, every one (an empty one too), in a stable order."""
    return sorted(parse_qsl(urlsplit(url).query, keep_blank_values=True))


def wait_for_query(page: Any, *pairs: tuple[str, str]) -> None:
    wait_for_address(page, lambda url: query_of(url) == sorted(pairs), f"the query {pairs}")


def test_the_url_keeps_exactly_the_batches_shown_and_the_event_type(browser, transactional_db):
    make_user("olivia", "operators")
    run = run_inline("migrate-records", {"count": 40, "batch_size": 10})
    browser.login("olivia", PASSWORD)
    page = browser.goto(f"/runs/{run.id}/")
    batch_lanes = page.locator('svg.timeline g.lane[data-lane^="migrate["]')
    event_type = page.get_by_label("Event type")
    event_rows = page.locator("#events tbody tr")
    hide = page.get_by_role("link", name="Hide the batches of migrate")
    show = page.get_by_role("link", name="Show the 4 batches of migrate")
    expect(batch_lanes).to_have_count(4)
    every_event = event_rows.count()

    def shows(lanes: int, chosen: str, rows: int, *pairs: tuple[str, str]) -> None:
        wait_for_query(page, *pairs)
        expect(batch_lanes).to_have_count(lanes)
        expect(event_type).to_have_value(chosen)
        expect(event_rows).to_have_count(rows)

    hide.click()
    shows(0, "", every_event, ("collapse", "migrate"))
    show.click()
    shows(4, "", every_event)
    hide.click()
    shows(0, "", every_event, ("collapse", "migrate"))
    # The event type changes the log, and keeps the batches as they are.
    event_type.select_option("step_succeeded")
    succeeded = 6  # list_records, the map step and its 4 batches
    shows(0, "step_succeeded", succeeded, ("collapse", "migrate"), ("type", "step_succeeded"))
    # The batches change the drawing, and keep the event type.
    show.click()
    shows(4, "step_succeeded", succeeded, ("type", "step_succeeded"))
    hide.click()
    shows(0, "step_succeeded", succeeded, ("collapse", "migrate"), ("type", "step_succeeded"))
    event_type.select_option("")
    shows(0, "", every_event, ("collapse", "migrate"))

    page.go_back()
    shows(0, "step_succeeded", succeeded, ("collapse", "migrate"), ("type", "step_succeeded"))
    page.go_back()
    shows(4, "step_succeeded", succeeded, ("type", "step_succeeded"))
    page.go_forward()
    shows(0, "step_succeeded", succeeded, ("collapse", "migrate"), ("type", "step_succeeded"))
    page.reload()
    shows(0, "step_succeeded", succeeded, ("collapse", "migrate"), ("type", "step_succeeded"))
    expect(page).to_have_title(f"migrate-records run {str(run.id)[:8]}… · durable-runs")


def test_retry_is_offered_only_where_the_engine_retries(browser, transactional_db):
    make_user("olivia", "operators")
    failed = run_inline("fork-fail")
    assert failed.status == "failed"
    # A rejected refund: `decide` failed, the run failed, and its compensation released
    # the hold. The run is undone; the engine retries only a failed compensation.
    rejected = run_inline(
        "agent-refund", {"ticket": 4, "amount": 30}, signals={"approval": {"approved": False}}
    )
    assert rejected.status == "failed" and rejected.step_statuses["decide"] == "failed"
    assert rejected.step_statuses["release_hold"] == "succeeded"
    # A failed run that retention has begun to compact: what a retried step would read
    # may be gone (retention marks a run so in its first stage's transaction).
    compacted = run_inline("fork-fail")
    Run.objects.filter(pk=compacted.id).update(retention_started_at=Now())
    browser.login("olivia", PASSWORD)

    page = browser.goto(f"/runs/{failed.id}/")
    page.get_by_role("button", name="Retry failed step…").click()
    dialog = page.get_by_role("dialog", name="Retry doomed_branch?")
    expect(dialog.get_by_role("button", name="Retry now")).to_be_visible()
    dialog.get_by_role("button", name="Not now").click()
    expect(dialog).to_be_hidden()

    page = browser.goto(f"/runs/{rejected.id}/")
    expect(page.locator("#step-decide")).to_contain_text("failed")
    expect(page.get_by_role("button", name="Retry failed step…")).to_have_count(0)
    expect(page.locator("#run-actions")).to_contain_text(
        "Not retryable: this run was undone (its compensations ran)"
    )
    browser.screenshot("run-not-retryable")

    page = browser.goto(f"/runs/{compacted.id}/")
    expect(page.locator("#step-doomed_branch")).to_contain_text("failed")
    expect(page.get_by_role("button", name="Retry failed step…")).to_have_count(0)
    expect(page.locator("#run-actions")).to_contain_text(
        "Not retryable: retention compacted this run"
    )


def test_a_signal_with_invalid_json_keeps_the_dialog_open_with_the_error(browser, transactional_db):
    make_user("olivia", "operators")
    waiting = run_inline("submitter-nudge")  # waits for its signal, with no timeout
    assert waiting.status == "waiting"
    browser.login("olivia", PASSWORD)
    page = browser.goto(f"/runs/{waiting.id}/")
    page.evaluate("window.noReloadMarker = 'still here'")  # a reload would erase it
    page.get_by_role("button", name="Send signal “nudge”…").click()
    dialog = page.get_by_role("dialog", name="Send signal “nudge”?")
    payload = dialog.get_by_label("Payload (JSON, optional)")
    payload.fill('{"go": tru}')
    dialog.get_by_role("button", name="Send the signal").click()

    error = dialog.get_by_role("alert")
    expect(error).to_contain_text("the payload is not valid JSON")
    expect(dialog).to_be_visible()
    expect(payload).to_have_value('{"go": tru}')  # nothing typed is lost
    expect(payload).to_have_attribute("aria-invalid", "true")
    expect(payload).to_be_focused()  # to correct it at once
    assert page.evaluate("window.noReloadMarker") == "still here"
    assert not Signal.objects.filter(run=waiting).exists()
    # The refused form is answered 422 (swapped, base.html's htmx config), which Chrome
    # logs as a failed load: that one line is expected, nothing else.
    assert browser.errors == [
        "console error: Failed to load resource: the server responded with a status of 422 "
        "(Unprocessable Entity)"
    ]
    browser.errors.clear()
    browser.screenshot("run-signal-invalid-json")
    browser.screenshot("run-signal-invalid-json", width=390)

    payload.fill('{"go": true}')
    dialog.get_by_role("button", name="Send the signal").click()
    expect(page.locator("#messages")).to_contain_text("Signal 'nudge' sent")
    assert Signal.objects.get(run=waiting).payload == {"go": True}


def test_timeline_details_can_be_read_on_a_phone(chromium, live_server, transactional_db):
    """A <title> shows on hover only: on a touch screen a tap on a bar or a mark must
    show its details, and every detail is also listed as text under the drawing."""
    make_user("olivia", "operators")
    failed = run_inline("fork-fail")
    phone = Phone(chromium, live_server.url)
    try:
        phone.login("olivia", PASSWORD)
        page = phone.goto(f"/runs/{failed.id}/")
        bar = page.locator('svg.timeline g.lane[data-lane="doomed_branch"] g.bar')
        bar.tap()
        details = page.get_by_role("status", name="Details of what you tapped")
        expect(details).to_contain_text("doomed_branch · attempt 1 of 1 · failed")
        expect(details).to_contain_text("error: RuntimeError")
        phone.screenshot("run-timeline-tapped", width=390)

        page.get_by_text("Everything the timeline shows, as text").tap()
        listed = page.get_by_role("list", name="Everything the timeline shows")
        expect(listed).to_contain_text("doomed_branch · attempt 1 of 1 · failed")
        expect(listed).to_contain_text("not started: waits for steady")
        phone.screenshot("run-timeline-as-text", width=390)
        phone.check_accessibility("the run page with the timeline's text open, on a phone")
    finally:
        phone.close()
    assert not phone.errors, phone.errors


class Phone(Browser):
    """A phone: 390 px wide, touch, no mouse hover."""

    def __init__(self, chromium: Any, base_url: str) -> None:
        self.chromium, self.base_url = chromium, base_url
        self.context = chromium.new_context(
            viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True
        )
        self.errors: list[str] = []
        self.page = self.new_page()


def test_a_waiting_step_is_labelled_a_wait_and_says_when_it_times_out(browser, transactional_db):
    make_user("olivia", "operators")
    approval = engine.submit_run(workflow="agent-refund", input={"ticket": 6, "amount": 10})
    factories.run_queued(approval)  # proposes, holds the funds, then waits (3 days)
    napping = engine.submit_run(workflow="sleepy", input={"seconds": 3600})
    factories.run_queued(napping)
    browser.login("olivia", PASSWORD)

    page = browser.goto(f"/runs/{approval.id}/")
    row = page.locator("#step-approval")
    expect(row.locator(".kind")).to_have_text("wait")
    expect(row).to_contain_text("waiting")
    # A regular expression meets the text as it is, its template's line breaks included.
    expect(row).to_contain_text(
        re.compile(r"for signal “approval”\s+·\s+times out\s+in (2 d 23 h|3 d)")
    )
    expect(row).to_contain_text("then the step fails")
    lane = page.locator('svg.tl-labels g.lane[data-lane="approval"]')
    expect(lane).to_contain_text("wait")
    expect(lane).not_to_contain_text("pure")
    browser.screenshot("run-waiting-for-approval")

    page = browser.goto(f"/runs/{napping.id}/")
    row = page.locator("#step-nap")
    expect(row.locator(".kind")).to_have_text("sleep")
    expect(row).to_contain_text(re.compile(r"wakes\s+in (59|60) min"))
    lane = page.locator('svg.tl-labels g.lane[data-lane="nap"]')
    expect(lane).to_contain_text("sleep")
