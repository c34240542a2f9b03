"""The submit form in a real browser: fields from the schema, problems beside them."""

from __future__ import annotations

import pytest

from runs.models import Run
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def test_submit_a_typed_run_after_fixing_a_refused_field(browser, transactional_db):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.page
    browser.goto("/runs/")
    page.get_by_role("link", name="New run…").click()
    page.select_option("#in-workflow", "typed-order")
    page.wait_for_selector("#in-customer")
    assert "typed-order" in page.url  # the chosen workflow is in the URL (shareable)

    page.fill("#in-customer", "ann")
    page.fill("#in-amount", "0")
    page.select_option("#in-currency", label="USD")
    page.check("#in-express")
    page.get_by_role("button", name="Submit run").click()
    error = page.locator(".field.invalid .error")
    assert "greater than 0" in error.inner_text()
    assert page.input_value("#in-customer") == "ann"  # nothing typed is lost
    browser.screenshot("submit-form-refused")
    assert Run.objects.count() == 0

    page.fill("#in-amount", "12")
    page.get_by_role("button", name="Submit run").click()
    page.wait_for_url(f"{browser.base_url}/runs/*/")
    run = Run.objects.get()
    assert run.input["amount"] == 12 and run.input["currency"] == "USD" and run.input["express"]
    assert page.locator("h1").inner_text().startswith("typed-order@1")
