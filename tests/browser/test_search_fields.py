"""Finding a run by what it is about (docs/operating.md#finding-a-run), in a real
browser: a change id typed into the search box finds its runs and says what matched;
the filter pair (Filter by field, Field value) narrows the list; Back and Forward
retrace both."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from runs import engine
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def test_a_change_id_in_the_search_box_finds_its_run_saying_what_matched(browser, transactional_db):
    make_user("olivia", "operators")
    wanted = engine.submit_run(workflow="merge-change", input={"change_id": 4711})
    engine.submit_run(workflow="merge-change", input={"change_id": 4712})
    engine.submit_run(workflow="pure-chain", input={})
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    count = page.locator("#runs > p.muted")
    rows = page.get_by_role("region", name="Runs").locator("tbody tr")
    expect(count).to_have_text("3 runs")

    page.get_by_label("Search").press_sequentially("4711")
    expect(count).to_have_text("1 run matches")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("matched change_id = 4711 (merge-change)")
    wait_for_address(page, lambda url: url.endswith("/runs/?q=4711"), "?q=4711")
    browser.check_accessibility("the runs list found by a search field")
    browser.screenshot("search-field-found")
    browser.screenshot("search-field-found", width=390)

    rows.get_by_role("link", name=str(wanted.id)[:8]).click()
    wait_for_address(page, lambda url: url.endswith(f"/runs/{wanted.id}/"), "the run's page")
    expect(page.get_by_role("heading", level=1)).to_contain_text("merge-change")
    page.go_back()
    wait_for_address(page, lambda url: url.endswith("/runs/?q=4711"), "back to the results")
    expect(rows).to_contain_text("matched change_id = 4711 (merge-change)")


def test_the_filter_pair_narrows_the_list_and_back_and_forward_retrace_it(
    browser, transactional_db
):
    make_user("olivia", "operators")
    merge = engine.submit_run(workflow="merge-change", input={"change_id": 301})
    probed = engine.submit_run(workflow="merge-change-probed", input={"change_id": 301})
    engine.submit_run(workflow="charge-payment", input={"amount": 301})
    engine.submit_run(workflow="merge-change", input={"change_id": 302})
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    count = page.locator("#runs > p.muted")
    rows = page.get_by_role("region", name="Runs").locator("tbody tr")
    expect(count).to_have_text("4 runs")

    field = page.get_by_label("Filter by field")
    field.select_option(label="change_id (merge-change, merge-change-probed)")
    expect(count).to_have_text("4 runs")  # a field without a value filters nothing
    page.get_by_label("Field value").press_sequentially("301")
    expect(count).to_have_text("2 runs match")
    expect(rows).to_contain_text([str(probed.id)[:8], str(merge.id)[:8]])
    wait_for_address(
        page, lambda url: url.endswith("/runs/?field=change_id&value=301"), "the filter"
    )
    browser.check_accessibility("the runs list filtered by a search field")
    browser.screenshot("search-field-filtered")
    browser.screenshot("search-field-filtered", width=390)

    page.get_by_label("Workflow").select_option("merge-change")
    expect(count).to_have_text("1 run matches")
    expect(rows).to_contain_text([str(merge.id)[:8]])

    page.go_back()
    wait_for_address(page, lambda url: url.endswith("/runs/?field=change_id&value=301"), "back")
    expect(count).to_have_text("2 runs match")
    expect(page.get_by_label("Field value")).to_have_value("301")
    page.go_forward()
    wait_for_address(page, lambda url: "workflow=merge-change" in url, "forward")
    expect(count).to_have_text("1 run matches")


def test_a_value_without_a_field_is_refused_beside_the_field(browser, transactional_db):
    make_user("olivia", "operators")
    engine.submit_run(workflow="merge-change", input={"change_id": 301})
    browser.allow_status(400)
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    page.get_by_label("Field value").press_sequentially("301")
    field = page.get_by_label("Filter by field")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#field-error")).to_have_text("choose the search field this value is of")
    field.select_option("change_id")
    expect(field).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#runs > p.muted")).to_have_text("1 run matches")


@pytest.mark.parametrize("width", [1280, 390])
def test_a_search_says_what_it_looked_at_and_a_run_links_to_its_fields_runs(
    browser, transactional_db, width
):
    make_user("olivia", "operators")
    merge = engine.submit_run(workflow="merge-change", input={"change_id": 301})
    probed = engine.submit_run(workflow="merge-change-probed", input={"change_id": 301})
    engine.submit_run(workflow="pure-chain", input={})
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    page.set_viewport_size({"width": width, "height": 900})
    count = page.locator("#runs > p.muted")
    rows = page.get_by_role("region", name="Runs").locator("tbody tr")
    search = page.get_by_label("Search")

    # A workflow without search fields: "0 runs match" says why, beside the search.
    page.get_by_label("Workflow").select_option("pure-chain")
    search.press_sequentially("301")
    expect(count).to_have_text("0 runs match")
    hint = page.locator("#q-hint")
    expect(hint).to_have_text(
        "pure-chain declares no search fields, so “301” was looked for in run ids, "
        "claim keys and submission keys only."
    )
    expect(search).to_have_accessible_description(re.compile("declares no search fields"))
    browser.check_accessibility(f"a search in a workflow without search fields at {width} px")
    browser.screenshot("search-no-fields", width=width)

    # Any workflow: the fields searched, and who declares them.
    page.get_by_label("Workflow").select_option("")
    expect(count).to_have_text("2 runs match")
    expect(hint).to_contain_text("change_id (merge-change, merge-change-probed)")
    expect(hint).to_contain_text("Other workflows declare none.")

    # A run's field value links to the runs with the same value; Back returns.
    rows.get_by_role("link", name=str(merge.id)[:8]).click()
    wait_for_address(page, lambda url: url.endswith(f"/runs/{merge.id}/"), "the run's page")
    page.get_by_role("link", name="Runs with the same change_id").click()
    wait_for_address(
        page, lambda url: url.endswith("/runs/?field=change_id&value=301"), "the same value"
    )
    expect(count).to_have_text("2 runs match")
    expect(rows).to_contain_text([str(probed.id)[:8], str(merge.id)[:8]])
    expect(page.get_by_label("Field value")).to_have_value("301")
    page.go_back()
    wait_for_address(page, lambda url: url.endswith(f"/runs/{merge.id}/"), "back to the run")
    expect(page.get_by_role("link", name="Runs with the same change_id")).to_be_visible()
    browser.check_accessibility(f"a run page with a search field at {width} px")
    browser.screenshot("run-search-field-link", width=width)
