"""The runs list in a real browser: its filters, as a person uses them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs import engine
from runs.models import Run
from runs.testing import run_inline
from runs.web import queries
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def test_clear_comes_and_goes_with_the_filters(browser, transactional_db):
    make_user("olivia", "operators")
    engine.submit_run(workflow="merge-change", input={"change_id": 1})
    engine.submit_run(workflow="pure-chain", input={})
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    clear = page.get_by_role("link", name="Clear")
    count = page.locator("#runs > p.muted")
    expect(count).to_have_text("2 runs")
    expect(clear).to_have_count(0)

    page.get_by_label("Workflow").select_option("pure-chain")
    expect(count).to_have_text("1 run matches")
    expect(clear).to_be_visible()
    browser.screenshot("runs-filtered")
    browser.screenshot("runs-filtered", width=390)
    clear.click()
    expect(page).to_have_url(f"{browser.base_url}/runs/")
    expect(count).to_have_text("2 runs")
    expect(page.get_by_label("Workflow")).to_have_value("")
    expect(clear).to_have_count(0)

    search = page.get_by_label("Search")
    search.press_sequentially("no-such-key")  # the list follows the typing
    expect(count).to_have_text("0 runs match")
    expect(clear).to_be_visible()
    search.press("Control+a")
    search.press("Backspace")
    expect(count).to_have_text("2 runs")
    expect(clear).to_have_count(0)


def test_created_until_a_minute_includes_that_whole_minute(browser, transactional_db):
    make_user("olivia", "operators")
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    minute = timezone.localtime(run.created_at).replace(second=0, microsecond=0)
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    count = page.locator("#runs > p.muted")
    until = page.get_by_label("Created until")

    # The datetime-local control sends the minute (HH:MM); the run was created at some
    # second of it, and "until HH:MM" includes it.
    until.fill(minute.strftime("%Y-%m-%dT%H:%M"))
    expect(count).to_have_text("1 run matches")
    expect(page.locator("#runs tbody")).to_contain_text(str(run.id)[:8])
    # Until the minute before: it is not included.
    until.fill((minute - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M"))
    expect(count).to_have_text("0 runs match")
    # From that minute: included.
    until.fill("")
    page.get_by_label("Created from").fill(minute.strftime("%Y-%m-%dT%H:%M"))
    expect(count).to_have_text("1 run matches")


def type_moment(field, text: str) -> None:
    """Type into a datetime-local field as a person does: a click on its first part
    (the month: month/day/year, hour:minute AM/PM here), the date's digits, a step to
    the time (the year part takes up to 6 digits, so it does not move on by itself), the
    time's."""
    box = field.bounding_box()
    field.click(position={"x": 12, "y": box["height"] / 2})
    day, time = text.split(" ")
    field.press_sequentially(day)
    field.press("ArrowRight")
    field.press_sequentially(time)


def test_the_filter_button_filters_without_reloading_the_page(browser, transactional_db):
    make_user("olivia", "operators")
    kept = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    engine.submit_run(workflow="pure-chain", input={})
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    page.evaluate("window.noReloadMarker = 'still here'")  # a reload would erase it
    count = page.locator("#runs > p.muted")
    filter_button = page.get_by_role("button", name="Filter")
    expect(filter_button).to_be_visible()

    page.get_by_label("Search").fill(str(kept.id)[:8])  # no keystrokes: only the button
    filter_button.click()
    expect(count).to_have_text("1 run matches")
    expect(page.locator("#runs tbody")).to_contain_text("matched the run id (its start)")
    wait_for_address(page, lambda url: url.endswith(f"/runs/?q={str(kept.id)[:8]}"), "?q=")
    assert page.evaluate("window.noReloadMarker") == "still here"

    page.get_by_label("Search").fill("")
    page.get_by_label("Search").press("Enter")  # Enter in the search box filters too
    expect(count).to_have_text("2 runs")
    wait_for_address(page, lambda url: url.endswith("/runs/"), "no filter")
    assert page.evaluate("window.noReloadMarker") == "still here"


def test_newer_pages_back_towards_the_latest_runs(browser, transactional_db, monkeypatch):
    monkeypatch.setattr(queries, "RUNS_PER_PAGE", 1)
    make_user("olivia", "operators")
    older = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    newer = engine.submit_run(workflow="merge-change", input={"change_id": 2})
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    rows = page.get_by_role("region", name="Runs").locator("tbody tr")
    pages = page.get_by_role("navigation", name="pages")
    expect(rows).to_contain_text([str(newer.id)[:8]])
    expect(pages.get_by_role("link", name="← newer")).to_have_count(0)

    pages.get_by_role("link", name="older →").click()
    wait_for_address(page, lambda url: url.endswith("/runs/?page=2"), "page 2")
    expect(rows).to_contain_text([str(older.id)[:8]])
    pages.get_by_role("link", name="← newer").click()
    wait_for_address(page, lambda url: url.endswith("/runs/?page=1"), "page 1")
    expect(rows).to_contain_text([str(newer.id)[:8]])
    expect(pages).to_contain_text("page 1")


def test_a_filter_the_list_cannot_use_is_refused_beside_its_field(browser, transactional_db):
    make_user("olivia", "operators")
    engine.submit_run(workflow="merge-change", input={"change_id": 1})
    browser.allow_status(400)  # the answer to a refused filter
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    count = page.locator("#runs > p.muted")
    until = page.get_by_label("Created until")

    type_moment(until, "12319999 1159P")  # until the calendar's very last minute
    wait_for_address(
        page, lambda url: "created_before=9999-12-31T23%3A59" in url, "created_before=9999…"
    )
    expect(until).to_have_attribute("aria-invalid", "true")
    expect(until).to_have_accessible_description(
        "'9999-12-31T23:59' is past the last moment this page can count to"
    )
    expect(page.locator(".field.invalid")).to_contain_text("past the last moment")
    expect(count).to_have_text("1 run")  # the bad filter is left out: no filter in effect
    browser.check_accessibility("the runs list with a refused filter")
    browser.screenshot("runs-refused-filter")
    browser.screenshot("runs-refused-filter", width=390)

    type_moment(until, "12312098 1159P")  # corrected: the error goes
    wait_for_address(
        page, lambda url: "created_before=2098-12-31T23%3A59" in url, "created_before=2098…"
    )
    expect(until).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator(".field.invalid")).to_have_count(0)
    expect(count).to_have_text("1 run matches")


ERROR = (
    "step merge failed: the merge service answered 409 Conflict for change 301 because "
    "branch release/2025-03 moved under it; see https://ci.example.com/merges/301/attempts/3"
)


def free_text_at_390(page, region: str, text: str) -> dict:
    """At 390 px: the width of the cell of `region` holding `text`, and whether its
    wrapper scrolls and shows it (the covers scroll with the table, the shadows not)."""
    page.set_viewport_size({"width": 390, "height": 900})
    wrap = page.get_by_role("region", name=region)
    cell = wrap.locator("td", has_text=text).first
    expect(cell).to_be_visible()
    return {
        "cell": cell.evaluate("td => td.getBoundingClientRect().width"),
        "scrolls": wrap.evaluate("w => w.scrollWidth > w.clientWidth"),
        "attachment": wrap.evaluate("w => getComputedStyle(w).backgroundAttachment"),
    }


def test_free_text_columns_are_readable_at_390_px_and_their_tables_say_they_scroll(
    browser, transactional_db
):
    """A table whose last column is free text squeezed it to a sliver at 390 px, beside
    ids and times that do not wrap, with no sign the table scrolls. Now the text keeps
    a readable width (it wraps, even inside a long token) and the wrapper scrolls to it,
    with a shadow at the edge that has more beyond it."""
    make_user("olivia", "operators")
    run = run_inline("fork-fail")
    assert run.status == "failed"
    # The length of a real service's error (the example's own is a few words).
    Run.objects.filter(pk=run.pk).update(error=ERROR)
    browser.login("olivia", PASSWORD)

    page = browser.goto("/runs/")
    seen = free_text_at_390(page, "Runs", "409 Conflict")
    assert seen["cell"] >= 120, seen
    assert seen["scrolls"], seen
    assert "local" in seen["attachment"] and "scroll" in seen["attachment"], seen
    browser.check_accessibility("the runs list with an error at 390 px")
    browser.screenshot("runs-list-error-column", width=390)

    page = browser.goto("/")
    seen = free_text_at_390(page, "Recent failures", "409 Conflict")
    assert seen["cell"] >= 120, seen
    assert seen["scrolls"], seen
    browser.screenshot("overview-recent-failures", width=390)

    # Scrolled to its end, the wrapper's right shadow is covered: nothing more there.
    wrap = page.get_by_role("region", name="Recent failures")
    wrap.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
    browser.check_accessibility("the overview at 390 px")
