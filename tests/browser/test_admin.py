"""/admin/ in a real browser: one page each time, never a loop of redirects."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from runs.models import RetentionPolicy, RetentionPolicyChange, Schedule
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def record_documents(page: Any) -> list[tuple[str, int]]:
    """(url, status) of every page the tab loads (redirects included)."""
    loads: list[tuple[str, int]] = []

    def seen(response: Any) -> None:
        if response.request.resource_type == "document":
            loads.append((response.url, response.status))

    page.on("response", seen)
    return loads


def test_a_viewer_opening_the_admin_gets_one_page_saying_why(browser, transactional_db):
    make_user("victor", "viewers")
    browser.login("victor", PASSWORD)
    page = browser.page
    assert page.locator("nav").get_by_role("link", name="Admin").count() == 0  # not offered
    loads = record_documents(page)
    browser.goto("/admin/")

    expect(page.get_by_role("heading", name="The admin is not for your account")).to_be_visible()
    expect(page.locator("main")).to_contain_text("You are signed in as victor (viewer)")
    assert loads == [(f"{browser.base_url}/admin/", 403)]
    # Chrome logs the 403 of the page it shows; the page itself is fine.
    assert browser.errors == [
        "console error: Failed to load resource: the server responded with a status of 403 "
        "(Forbidden)"
    ]
    browser.errors.clear()
    browser.check_accessibility("/admin/ refused to a viewer")
    browser.screenshot("admin-refused", width=390)

    page.get_by_role("link", name="Back to the dashboard").click()
    expect(page).to_have_url(f"{browser.base_url}/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_someone_signed_out_goes_to_the_login_page_once(browser, transactional_db):
    make_user("olivia", "operators")
    page = browser.page
    loads = record_documents(page)
    browser.goto("/admin/")
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    assert [status for _, status in loads] == [302, 200]
    assert loads[-1][0] == f"{browser.base_url}/login/?next=/admin/"

    page.get_by_label("Username").fill("olivia")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{browser.base_url}/admin/")
    expect(page.get_by_role("heading", name="Retention policies and schedules")).to_be_visible()


def test_the_admin_carries_the_product_name_and_leads_back_to_the_dashboard(
    browser, transactional_db
):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/admin/")

    header = page.get_by_role("banner")
    expect(header.get_by_role("link", name="durable-runs administration")).to_be_visible()
    expect(page).to_have_title("Retention policies and schedules | durable-runs admin")
    expect(page.get_by_role("heading", name="Retention policies and schedules")).to_be_visible()
    expect(page.get_by_text("Django administration")).to_have_count(0)
    browser.check_accessibility("the admin's index, branded")

    # From a page deeper in, too.
    page.get_by_role("link", name="Schedules").click()
    expect(page).to_have_title("Select schedule to change | durable-runs admin")
    header.get_by_role("link", name="Back to the dashboard").click()
    expect(page).to_have_url(f"{browser.base_url}/")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def admin_message(page: Any) -> Any:
    return page.locator("ul.messagelist li")


def test_an_operator_adds_edits_and_deletes_a_retention_policy(browser, transactional_db):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/admin/")
    page.get_by_role("link", name="Retention policies").click()
    expect(page.get_by_role("heading", name="Select retention policy to change")).to_be_visible()
    page.get_by_role("link", name="Add retention policy").click()

    page.get_by_label("Name").fill("merges")
    page.get_by_label("Workflow").fill("merge-change")
    page.get_by_label("Payload days").fill("10")
    page.get_by_label("Event days").fill("20")
    page.get_by_label("Dedup days").fill("400")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(admin_message(page)).to_have_text(
        "The retention policy “merges (merge-change)” was added successfully."
    )
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="merges"))
    expect(row).to_contain_text("merge-change")
    expect(row).to_contain_text("400")
    expect(row).to_contain_text("never")  # no purge yet
    browser.check_accessibility("the retention policies with one added")
    browser.screenshot("admin-policy-added")

    # Edited: a dedup window shorter than the events' is refused, beside its field.
    row.get_by_role("link", name="merges").click()
    dedup = page.get_by_label("Dedup days")
    dedup.fill("15")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".errornote")).to_contain_text("Please correct the error below.")
    field = page.locator(".form-row.field-dedup_days")
    expect(field).to_contain_text(
        "The dedup window (15 days) must be at least as long as the events window (20 days)"
    )
    expect(page.get_by_label("Dedup days")).to_have_value("15")  # what was typed stays
    browser.check_accessibility("a retention policy refused")
    browser.screenshot("admin-policy-refused", width=390)
    page.get_by_label("Dedup days").fill("500")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(admin_message(page)).to_have_text(
        "The retention policy “merges (merge-change)” was changed successfully."
    )
    expect(row).to_contain_text("500")
    assert RetentionPolicy.objects.get(name="merges").dedup_days == 500
    changes = RetentionPolicyChange.objects.filter(policy_name="merges").order_by("at", "id")
    assert [(c.action, c.actor) for c in changes] == [
        ("created", "olivia"),
        ("changed", "olivia"),
    ]

    # Deleted, after the confirmation page.
    row.get_by_role("link", name="merges").click()
    page.get_by_role("link", name="Delete").click()
    expect(page.get_by_role("main")).to_contain_text(
        re.compile(
            r"Are you sure you want to delete the retention policy .merges \(merge-change\).\?"
        )
    )
    browser.check_accessibility("the confirmation before deleting a policy")
    page.get_by_role("button", name="Yes, I\u2019m sure").click()
    expect(admin_message(page)).to_have_text(
        "The retention policy “merges (merge-change)” was deleted successfully."
    )
    expect(page.get_by_role("link", name="merges")).to_have_count(0)
    assert not RetentionPolicy.objects.filter(name="merges").exists()
    assert RetentionPolicyChange.objects.filter(policy_name="merges", action="deleted").exists()


def test_a_misspelt_workflow_of_a_retention_policy_is_refused_with_the_close_name(
    browser, transactional_db
):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/admin/runs/retentionpolicy/add/")
    page.get_by_label("Name").fill("merges")
    page.get_by_label("Workflow").fill("merge-chnage")
    page.get_by_label("Dedup days").fill("400")
    page.get_by_role("button", name="Save", exact=True).click()

    expect(page.locator(".errornote")).to_contain_text("Please correct the error below.")
    field = page.locator(".form-row.field-workflow")
    expect(field).to_contain_text(
        "no workflow named 'merge-chnage' is registered (did you mean merge-change"
    )
    expect(field).to_contain_text("Leave it empty for the default policy")
    expect(page.get_by_label("Workflow")).to_have_value("merge-chnage")  # what was typed
    assert not RetentionPolicy.objects.filter(name="merges").exists()
    browser.check_accessibility("a retention policy's unknown workflow refused")
    browser.screenshot("admin-policy-unknown-workflow", width=390)
    page.set_viewport_size({"width": 390, "height": 900})
    browser.check_accessibility("a retention policy's unknown workflow refused at 390 px")
    page.set_viewport_size({"width": 1280, "height": 900})

    page.get_by_label("Workflow").fill("merge-change")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(admin_message(page)).to_have_text(
        "The retention policy “merges (merge-change)” was added successfully."
    )
    assert RetentionPolicy.objects.get(name="merges").workflow == "merge-change"


def test_an_operator_adds_a_schedule_after_a_cron_refused_beside_its_field(
    browser, transactional_db
):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/admin/")
    page.get_by_role("link", name="Schedules").click()
    page.get_by_role("link", name="Add schedule").click()
    form = page.get_by_role("main")
    for unset in ("Next tick at", "Created at", "DatabaseDefault"):  # nothing has happened yet
        expect(form).not_to_contain_text(unset)

    page.get_by_label("Name").fill("nightly-chain")
    page.get_by_label("Workflow").fill("pure-chain")
    cron = page.get_by_label("Cron")
    cron.fill("every night at 3")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".errornote")).to_contain_text("Please correct the error below.")
    field = page.locator(".form-row.field-cron")
    expect(field.locator(".errorlist")).to_be_visible()
    expect(page.get_by_label("Cron")).to_have_value("every night at 3")
    expect(page.get_by_label("Cron")).to_have_attribute("aria-invalid", "true")
    expect(page.locator(".errorlist")).to_have_count(1)  # only the cron is wrong
    assert not Schedule.objects.exists()
    expect(form).not_to_contain_text("DatabaseDefault")
    browser.check_accessibility("a schedule refused for its cron")
    browser.screenshot("admin-schedule-refused")

    page.get_by_label("Cron").fill("0 3 * * *")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(admin_message(page)).to_contain_text("was added successfully.")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="nightly-chain"))
    expect(row).to_contain_text("pure-chain")
    expect(row).to_contain_text("0 3 * * *")
    schedule = Schedule.objects.get()
    assert (schedule.workflow, schedule.cron, schedule.enabled) == ("pure-chain", "0 3 * * *", True)
    assert schedule.next_tick_at is not None  # started at its next tick
    browser.screenshot("admin-schedule-added")
