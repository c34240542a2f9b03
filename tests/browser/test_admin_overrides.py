"""An operator changes a declared concurrency limit and a declared breaker at run time in
the admin (docs/operating.md#concurrency-limits, #breakers): a limit or breaker nobody
declared is refused beside its field, a change is audited, Back and Forward bring the
pages back."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from runs.models import (
    BreakerChange,
    BreakerSetting,
    LimitChange,
    LimitSetting,
    RateChange,
    RateSetting,
)
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def admin_message(page):
    return page.locator("ul.messagelist li")


def test_an_operator_overrides_a_declared_limit_after_an_undeclared_one_is_refused(
    browser, transactional_db
):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/admin/runs/limitsetting/")
    expect(page.get_by_role("heading", name="Select limit setting to change")).to_be_visible()
    page.get_by_role("link", name="Add limit setting").click()

    page.get_by_label("Workflow").fill("limited-three")
    page.get_by_label("Step").fill("other")
    page.get_by_label("Max").fill("1")
    page.get_by_label("Reason").fill("the host is slow today")
    page.get_by_role("button", name="Save", exact=True).click()
    field = page.locator(".form-row.field-step")
    expect(field).to_contain_text("workflow 'limited-three' declares no limit on step 'other'")
    expect(field).to_contain_text("its limits: step work")
    expect(page.get_by_label("Reason")).to_have_value("the host is slow today")
    assert not LimitSetting.objects.exists()
    browser.check_accessibility("a limit override refused")
    browser.screenshot("admin-limit-refused", width=390)

    page.get_by_label("Step").fill("work")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(admin_message(page)).to_have_text(
        "The limit setting “limit of limited-three.work” was added successfully."
    )
    row = page.get_by_role("row").filter(
        has=page.get_by_role("link", name="limited-three", exact=True)
    )
    expect(row).to_contain_text("work")
    browser.screenshot("admin-limit-added")

    row.get_by_role("link", name="limited-three", exact=True).click()
    page.get_by_label("Max").fill("2")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(admin_message(page)).to_contain_text("was changed successfully")
    assert LimitSetting.objects.get().max == 2
    changes = LimitChange.objects.order_by("at", "id")
    assert [(c.action, c.actor, c.old, c.new) for c in changes] == [
        ("created", "olivia", None, {"max": 1, "reason": "the host is slow today"}),
        (
            "changed",
            "olivia",
            {"max": 1, "reason": "the host is slow today"},
            {"max": 2, "reason": "the host is slow today"},
        ),
    ]

    page.go_back()
    expect(page.get_by_label("Max")).to_be_visible()  # the form it came from
    page.go_forward()
    expect(page.get_by_role("heading", name="Select limit setting to change")).to_be_visible()


def test_an_operator_switches_a_declared_breaker_off_and_the_change_is_audited(
    browser, transactional_db
):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/admin/runs/breakersetting/add/")

    page.get_by_label("Workflow").fill("tripping-charge")
    page.get_by_label("Step").fill("receipt")
    page.get_by_label("Outcomes").fill("5")
    page.get_by_label("Within seconds").fill("60")
    page.get_by_label("Reason").fill("a planned outage")
    page.get_by_role("button", name="Save", exact=True).click()
    field = page.locator(".form-row.field-step")
    expect(field).to_contain_text(
        "workflow 'tripping-charge' declares no breaker on step 'receipt'"
    )
    expect(field).to_contain_text("its breakers: step charge")
    assert not BreakerSetting.objects.exists()

    page.get_by_label("Step").fill("charge")
    page.get_by_label("Enabled").uncheck()
    page.get_by_role("button", name="Save", exact=True).click()
    expect(admin_message(page)).to_contain_text("was added successfully")
    setting = BreakerSetting.objects.get()
    assert (setting.enabled, setting.outcomes, setting.within_seconds) == (False, 5, 60.0)
    (change,) = BreakerChange.objects.all()
    assert (change.action, change.actor, change.new["enabled"]) == ("created", "olivia", False)
    browser.check_accessibility("a breaker override added")


def test_an_operator_slows_a_declared_rate_after_an_undeclared_one_is_refused(
    browser, transactional_db
):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/admin/runs/ratesetting/add/")

    page.get_by_label("Workflow").fill("paced")
    page.get_by_label("Step").fill("tick")
    page.get_by_label("Per").fill("account")
    page.get_by_label("Starts").fill("1")
    page.get_by_label("Every seconds").fill("2")
    page.get_by_label("Reason").fill("the provider throttles us")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".form-row.field-step")).to_contain_text(
        "workflow 'paced' declares no rate on step 'tick' per 'account'; its rates: step tick"
    )
    assert not RateSetting.objects.exists()

    page.get_by_label("Per").fill("")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(admin_message(page)).to_have_text(
        "The rate setting “rate of paced.tick” was added successfully."
    )
    (change,) = RateChange.objects.all()
    assert (change.action, change.actor, change.new) == (
        "created",
        "olivia",
        {"starts": 1, "every_seconds": 2.0, "reason": "the provider throttles us"},
    )
    browser.check_accessibility("a rate override added")
