"""Pausing and resuming in a real browser, by role and label: the Pause form on
/pauses/ (the workflow's steps come with it), the paused mark on the run page, the
overview's Paused panel and its Resume, Back and Forward, and what a viewer sees."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from runs import engine
from runs.models import Pause, PauseChange, Step
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def signed_in(browser: Any, path: str, name: str = "olivia", role: str = "operators") -> Any:
    make_user(name, role)
    browser.login(name, PASSWORD)
    return browser.goto(path)


def test_operator_pauses_a_step_sees_it_on_the_run_and_resumes_it(browser, transactional_db):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 12})
    page = signed_in(browser, "/")
    panel = page.get_by_role("region", name="Paused")
    expect(panel).to_contain_text("Nothing is paused.")

    panel.get_by_role("link", name="Pause a workflow or a step, and the audit").click()
    wait_for_address(page, lambda url: url.endswith("/pauses/"), "/pauses/")
    page.get_by_label("Workflow", exact=True).select_option("merge-change")
    step = page.get_by_label("Step (optional)")
    expect(step.locator("option", has_text="merge")).to_have_count(1)
    step.select_option("merge")
    page.get_by_label("Reason (required").fill("code host is down")
    page.get_by_role("button", name="Pause", exact=True).click()

    expect(page.locator("#messages")).to_contain_text("Paused step merge of merge-change")
    paused = page.get_by_role("region", name="Paused")
    expect(paused).to_contain_text("merge-change step merge")
    expect(paused).to_contain_text("by olivia")
    audit = page.get_by_role("region", name="Audit of pauses and resumes")
    expect(audit.locator("tbody tr")).to_have_count(1)
    expect(audit).to_contain_text("code host is down")
    assert list(Pause.objects.values_list("workflow", "step", "actor")) == [
        ("merge-change", "merge", "olivia")
    ]
    # The merge's message comes while the pause stands: the start refuses it, so the
    # resume has one step to send again.
    merge = Step.objects.get(run=run, name="merge")
    assert engine.execute_step(step_id=merge.id, worker="w") == "skipped"
    browser.check_accessibility("the pauses page with a pause")
    browser.screenshot("pauses-page")
    browser.screenshot("pauses-page", width=390)

    page = browser.goto(f"/runs/{run.id}/")
    row = page.locator("#step-merge")
    expect(row).to_contain_text("paused")
    expect(row).to_contain_text("step merge paused by olivia")
    expect(row).to_contain_text("code host is down")
    browser.screenshot("run-paused-step", width=390)
    browser.screenshot("run-paused-step")

    page.go_back()
    wait_for_address(page, lambda url: url.endswith("/pauses/"), "/pauses/ after Back")
    expect(page.get_by_role("heading", level=1)).to_have_text("Pauses")
    page.go_forward()
    wait_for_address(page, lambda url: url.endswith(f"/runs/{run.id}/"), "the run after Forward")
    expect(page.locator("#step-merge")).to_contain_text("paused by olivia")

    page = browser.goto("/")
    panel = page.get_by_role("region", name="Paused")
    expect(panel).to_contain_text("code host is down")
    browser.screenshot("overview-paused")
    browser.screenshot("overview-paused", width=390)
    browser.check_accessibility("the overview with a pause")
    panel.get_by_label("Why resume merge-change merge").fill("code host is back")
    panel.get_by_role("button", name="Resume merge-change merge").click()

    wait_for_address(page, lambda url: url == browser.base_url + "/", "the overview")
    expect(page.get_by_role("region", name="Paused")).to_contain_text("Nothing is paused.")
    expect(page.locator("#messages")).to_contain_text(
        "Resumed merge-change (step merge): 1 waiting step sent again."
    )
    assert list(PauseChange.objects.order_by("id").values_list("action", "actor", "reason")) == [
        ("pause", "olivia", "code host is down"),
        ("resume", "olivia", "code host is back"),
    ]


def test_a_pause_without_a_reason_is_refused_beside_the_field(browser, transactional_db):
    page = signed_in(browser, "/pauses/")
    browser.allow_status(422)
    page.get_by_label("Workflow", exact=True).select_option("merge-change")
    page.get_by_role("button", name="Pause", exact=True).click()
    reason = page.get_by_label("Reason (required")
    expect(reason).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#pause-reason-error")).to_have_text(
        "a pause needs a reason: say why, for the audit"
    )
    assert Pause.objects.count() == 0
    browser.screenshot("pauses-refused", width=390)


def test_a_viewer_sees_the_pauses_without_controls(browser, transactional_db):
    engine.pause(workflow="merge-change", actor="ann", reason="code host down")
    page = signed_in(browser, "/", name="victor", role="viewers")
    panel = page.get_by_role("region", name="Paused")
    expect(panel).to_contain_text("code host down")
    expect(panel.get_by_role("button")).to_have_count(0)
    panel.get_by_role("link", name="See the audit").click()
    wait_for_address(page, lambda url: url.endswith("/pauses/"), "/pauses/")
    expect(page.get_by_role("button", name="Pause", exact=True)).to_have_count(0)
    expect(page.get_by_role("region", name="Audit of pauses and resumes")).to_contain_text("ann")


def test_the_pause_form_chooses_no_workflow_unless_opened_for_one(browser, transactional_db):
    """From the navigation nothing is chosen (a hurried operator must not pause the
    first workflow of the list by not looking); from a run, its workflow is."""
    run = engine.submit_run(workflow="merge-change", input={"change_id": 12})
    page = signed_in(browser, "/runs/")
    nav = page.get_by_role("navigation", name="main")
    nav.get_by_role("link", name="Pauses").click()
    wait_for_address(page, lambda url: url.endswith("/pauses/"), "/pauses/")
    expect(nav.get_by_role("link", name="Pauses")).to_have_attribute("aria-current", "page")
    expect(page.get_by_label("Workflow", exact=True)).to_have_value("")
    page.get_by_label("Reason (required").fill("code host is down")
    browser.allow_status(422)
    page.get_by_role("button", name="Pause", exact=True).click()
    workflow = page.get_by_label("Workflow", exact=True)
    expect(workflow).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#pause-workflow-error")).to_have_text("Choose the workflow to pause.")
    expect(page.get_by_label("Reason (required")).to_have_value("code host is down")
    expect(nav.get_by_role("link", name="Pauses")).to_have_attribute("aria-current", "page")
    expect(nav.get_by_role("link", name="Runs", exact=True)).not_to_have_attribute(
        "aria-current", "page"
    )
    assert Pause.objects.count() == 0
    browser.screenshot("pauses-no-workflow-chosen", width=390)

    page = browser.goto(f"/runs/{run.id}/")
    page.get_by_role("link", name="Pause this workflow…").click()
    wait_for_address(page, lambda url: "workflow=merge-change" in url, "the form for merge-change")
    expect(page.get_by_label("Workflow", exact=True)).to_have_value("merge-change")
    browser.check_accessibility("the pause form opened from a run")
    page.go_back()
    wait_for_address(page, lambda url: url.endswith(f"/runs/{run.id}/"), "the run after Back")
    page.go_forward()
    wait_for_address(page, lambda url: "workflow=merge-change" in url, "the form after Forward")
    expect(page.get_by_label("Workflow", exact=True)).to_have_value("merge-change")


def test_pausing_what_is_paused_says_when_in_a_person_s_time(browser, transactional_db):
    engine.pause(workflow="merge-change", actor="ann", reason="host down")
    page = signed_in(browser, "/pauses/")
    browser.allow_status(422)
    page.get_by_label("Workflow", exact=True).select_option("merge-change")
    page.get_by_label("Reason (required").fill("again")
    page.get_by_role("button", name="Pause", exact=True).click()
    refusal = page.get_by_role("alert").filter(has_text="already paused")
    expect(refusal).to_have_text(
        re.compile(
            r"workflow 'merge-change' is already paused: by ann \d+ s ago "
            r"\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\): host down"
        )
    )
    browser.check_accessibility("a refused second pause")
    browser.screenshot("pauses-already-paused", width=390)
