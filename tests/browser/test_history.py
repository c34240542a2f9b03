"""Back, Forward and reload in a real browser on the pages whose filters go into the
address bar (htmx swaps a part of the page and pushes its URL): each time a whole page
(its title, header, stylesheet and scripts), and filter controls that say what the URL
and the table say. Every answer that differs for htmx says so (Vary), so no cache can
hand a part of a page to the browser as the page."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from playwright.sync_api import expect

from reconciliation import views as reconciliation_views
from runs import engine
from runs.engine import resolve_claim
from runs.testing import run_inline
from runs.web import queries
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.support import factories

pytestmark = pytest.mark.browser


def record_answers(page: Any) -> list[tuple[str, bool, str]]:
    """(url, asked by htmx, Vary) of every page or part the server answers (not the
    static files, not the badge's polls)."""
    answers: list[tuple[str, bool, str]] = []

    def seen(response: Any) -> None:
        if "/static/" in response.url or "/badge/" in response.url:
            return
        asked_by_htmx = response.request.headers.get("hx-request") == "true"
        answers.append((response.url, asked_by_htmx, response.headers.get("vary", "")))

    page.on("response", seen)
    return answers


def wait_for_query(tab: Any, path: str, **params: str) -> None:
    """The address bar shows `path` with exactly these parameters set (an empty one
    counts as not set: the page reads it so)."""

    def matches(url: str) -> bool:
        parts = urlsplit(url)
        query = {k: v for k, v in parse_qsl(parts.query, keep_blank_values=True) if v}
        return parts.path == path and query == params

    wait_for_address(tab, matches, f"{path} with {params}")


def assert_whole_page(browser: Any, title: str) -> None:
    page = browser.page
    expect(page).to_have_title(f"{title} · durable-runs")
    expect(page.get_by_role("banner")).to_be_visible()
    expect(page.get_by_role("navigation", name="main")).to_be_visible()
    # The stylesheet applies (the top bar's colour) and the scripts run.
    expect(page.locator("header.topbar")).to_have_css("background-color", "rgb(27, 34, 48)")
    assert page.evaluate("typeof window.htmx") == "object"


def assert_answers_vary(answers: list[tuple[str, bool, str]]) -> None:
    """A URL answered with a part to htmx and with the page to a browser must say that
    its answer depends on HX-Request, or a cache may give one for the other."""
    parts = [(url, vary) for url, by_htmx, vary in answers if by_htmx]
    assert parts, "htmx asked for nothing"
    for url, vary in parts:
        assert "hx-request" in vary.lower(), f"{url}: Vary is {vary!r}"


def test_runs_list_back_forward_and_reload(browser, transactional_db, monkeypatch):
    monkeypatch.setattr(queries, "RUNS_PER_PAGE", 1)
    make_user("olivia", "operators")
    for n in (1, 2):
        run_inline("merge-change", {"change_id": n})  # succeeded
    engine.submit_run(workflow="merge-change", input={"change_id": 3})  # pending
    run_inline("pure-chain")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    answers = record_answers(page)
    workflow, status = page.get_by_label("Workflow"), page.get_by_label("Status")
    count = page.locator("#runs > p.muted")

    def shows(counted: str, **query: str) -> None:
        wait_for_query(page, "/runs/", **query)
        assert_whole_page(browser, "Runs")
        expect(workflow).to_have_value(query.get("workflow", ""))
        expect(status).to_have_value(query.get("status", ""))
        expect(count).to_have_text(counted)

    shows("4 runs")
    workflow.select_option("merge-change")
    shows("3 runs match", workflow="merge-change")
    status.select_option(label="succeeded")
    shows("2 runs match", workflow="merge-change", status="succeeded")
    page.get_by_role("link", name="older →").click()
    shows("2 runs match", workflow="merge-change", status="succeeded", page="2")

    page.go_back()
    shows("2 runs match", workflow="merge-change", status="succeeded")
    page.go_back()
    shows("3 runs match", workflow="merge-change")
    page.go_back()
    shows("4 runs")
    page.go_forward()
    shows("3 runs match", workflow="merge-change")
    page.go_forward()
    shows("2 runs match", workflow="merge-change", status="succeeded")
    page.go_forward()
    shows("2 runs match", workflow="merge-change", status="succeeded", page="2")
    page.reload()
    shows("2 runs match", workflow="merge-change", status="succeeded", page="2")
    assert_answers_vary(answers)


def test_queue_back_forward_and_reload(browser, transactional_db, monkeypatch):
    monkeypatch.setattr(reconciliation_views, "PAGE_SIZE", 2)
    make_user("olivia", "operators")
    factories.crashed("merge-change", count=3)
    factories.crashed("merge-change-probed", count=1)
    browser.login("olivia", PASSWORD)
    page = browser.goto("/reconciliation/")
    answers = record_answers(page)
    workflow = page.get_by_label("Workflow")
    claims = page.locator("#queue tbody[id^=claim-]")

    def shows(rows: int, **query: str) -> None:
        wait_for_query(page, "/reconciliation/", **query)
        assert_whole_page(browser, "Reconciliation")
        expect(workflow).to_have_value(query.get("workflow", ""))
        expect(claims).to_have_count(rows)

    shows(2)
    # A screenshot on the way (Playwright's hides the caret by writing an inline style
    # on every input, as some browser extensions do): a page restored from history
    # must not bring such styles back against the CSP.
    browser.screenshot("queue-before-filtering")
    workflow.select_option("merge-change-probed")
    shows(1, workflow="merge-change-probed")
    workflow.select_option("merge-change")
    shows(2, workflow="merge-change")
    page.get_by_role("link", name="newer →").click()
    shows(1, workflow="merge-change", page="2")

    page.go_back()
    shows(2, workflow="merge-change")
    page.go_back()
    shows(1, workflow="merge-change-probed")
    page.go_back()
    shows(2)
    page.go_forward()
    shows(1, workflow="merge-change-probed")
    page.go_forward()
    shows(2, workflow="merge-change")
    page.go_forward()
    shows(1, workflow="merge-change", page="2")
    page.reload()
    shows(1, workflow="merge-change", page="2")
    browser.screenshot("queue-after-history")
    assert_answers_vary(answers)


def test_past_resolutions_back_forward_and_reload(browser, transactional_db, monkeypatch):
    monkeypatch.setattr(reconciliation_views, "HISTORY_PAGE_SIZE", 2)
    make_user("olivia", "operators")
    claims = factories.crashed("merge-change", count=4)
    for claim, who in zip(claims, ["ann", "ann", "ann", "bob"], strict=True):
        resolve_claim(claim, "failed", actor=who, note="no merge on the code host")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/reconciliation/history/")
    answers = record_answers(page)
    operator, outcome = page.get_by_label("Decided by"), page.get_by_label("Outcome")
    count = page.locator("#history > p.muted")

    def shows(counted: str, rows: int, **query: str) -> None:
        wait_for_query(page, "/reconciliation/history/", **query)
        assert_whole_page(browser, "Past resolutions")
        expect(operator).to_have_value(query.get("operator", ""))
        expect(outcome).to_have_value(query.get("outcome", ""))
        expect(count).to_have_text(counted)
        expect(page.locator("#history tbody tr")).to_have_count(rows)

    shows("4 resolutions", 2)
    outcome.select_option("failed")
    shows("4 resolutions", 2, outcome="failed")
    operator.select_option("ann")
    shows("3 resolutions", 2, outcome="failed", operator="ann")
    page.get_by_role("link", name="older →").click()
    shows("3 resolutions", 1, outcome="failed", operator="ann", page="2")

    page.go_back()
    shows("3 resolutions", 2, outcome="failed", operator="ann")
    page.go_back()
    shows("4 resolutions", 2, outcome="failed")
    page.go_back()
    shows("4 resolutions", 2)
    page.go_forward()
    shows("4 resolutions", 2, outcome="failed")
    page.go_forward()
    shows("3 resolutions", 2, outcome="failed", operator="ann")
    page.go_forward()
    shows("3 resolutions", 1, outcome="failed", operator="ann", page="2")
    page.reload()
    shows("3 resolutions", 1, outcome="failed", operator="ann", page="2")
    assert_answers_vary(answers)


def test_new_run_form_back_and_forward_keep_the_workflow_and_its_fields(browser, transactional_db):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/")
    page.get_by_role("link", name="New run…").click()
    answers = record_answers(page)
    workflow = page.get_by_label("Workflow")
    legend = page.locator("#submit-fields legend")

    def shows(chosen: str, **query: str) -> None:
        wait_for_query(page, "/runs/new/", **query)
        assert_whole_page(browser, "New run")
        expect(workflow).to_have_value(chosen)
        expect(legend).to_have_text(re.compile(f"^Input of {chosen} v"))

    first = workflow.input_value()
    shows(first)
    workflow.select_option("typed-order")
    shows("typed-order", workflow="typed-order")
    page.get_by_label("customer").fill("ann")
    workflow.select_option("migrate-records")
    shows("migrate-records", workflow="migrate-records")

    page.go_back()
    shows("typed-order", workflow="typed-order")
    page.go_back()
    shows(first)
    page.go_forward()
    shows("typed-order", workflow="typed-order")
    page.go_forward()
    shows("migrate-records", workflow="migrate-records")
    page.reload()
    shows("migrate-records", workflow="migrate-records")
    assert_answers_vary(answers)
