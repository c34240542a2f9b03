"""The submit form in a real browser: fields from the schema, problems beside them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.models import Run
from runs.workflows import PURE, Context, Field, Workflow
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.support.declared import registered

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


@pytest.fixture
def two_versions() -> Iterator[None]:
    """A workflow with two versions, registered only for one test: v2 added an input."""
    made = []
    for version, fields, description in (
        (1, {"name": str}, "Greets someone."),
        (2, {"name": str, "loud": Field(bool, default=False)}, "Greets someone, loudly if asked."),
    ):
        wf = Workflow("greeting", version=version, input=fields, description=description)

        @wf.step(kind=PURE)
        def greet(ctx: Context) -> str:
            return f"hello {ctx.input['name']}"

        made.append(wf)
    with registered(*made):
        yield


def test_the_version_chosen_shows_that_versions_input_and_is_the_one_submitted(
    browser, transactional_db, two_versions
):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/new/")
    page.get_by_label("Workflow").select_option("greeting")
    version = page.get_by_label("Version")
    legend = page.locator("#submit-fields legend")
    expect(version).to_have_value("2")  # the latest, said so
    expect(version.locator("option:checked")).to_have_text("v2 (latest)")
    expect(legend).to_have_text("Input of greeting v2")
    expect(page.get_by_label("loud")).to_be_visible()

    version.focus()  # from the keyboard: the arrow keys choose within a closed select
    page.keyboard.press("ArrowUp")
    expect(legend).to_have_text("Input of greeting v1")
    expect(page.get_by_text("Greets someone.", exact=True)).to_be_visible()
    expect(page.get_by_label("loud")).to_have_count(0)  # v1 has no such input
    expect(version).to_have_value("1")
    expect(version).to_be_focused()  # still where the person was
    wait_for_address(
        page,
        lambda url: (
            sorted(parse_qsl(urlsplit(url).query)) == [("version", "1"), ("workflow", "greeting")]
        ),
        "?workflow=greeting&version=1",
    )
    browser.check_accessibility("the new run form with an older version chosen")
    browser.screenshot("submit-form-version")

    page.get_by_label("name").fill("ann")
    page.get_by_role("button", name="Submit run").click()
    wait_for_address(page, lambda url: re.search(r"/runs/[0-9a-f-]{36}/$", url), "the run page")
    expect(page.get_by_role("heading", level=1)).to_contain_text("greeting@1")
    run = Run.objects.get()
    assert (run.version, run.input) == (1, {"name": "ann"})


def test_a_json_field_refused_then_corrected(browser, transactional_db):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/new/")
    page.get_by_label("Workflow").select_option("map-items")
    items = page.get_by_label("items")
    expect(items).to_have_js_property("tagName", "TEXTAREA")  # any JSON: a text area
    items.press_sequentially("[1, 2, 3")
    page.get_by_role("button", name="Submit run").click()

    items = page.get_by_label("items")
    expect(items).to_have_attribute("aria-invalid", "true")
    expect(items).to_have_accessible_description(re.compile("not valid JSON"))
    expect(items).to_have_value("[1, 2, 3")  # nothing typed is lost
    assert Run.objects.count() == 0
    browser.check_accessibility("the new run form with a refused JSON field")
    browser.screenshot("submit-form-json-refused")

    items.press("End")
    items.press_sequentially("]")
    page.get_by_role("button", name="Submit run").click()
    wait_for_address(page, lambda url: re.search(r"/runs/[0-9a-f-]{36}/$", url), "the run page")
    expect(page.get_by_role("region", name="input")).to_contain_text('"items": [')
    assert Run.objects.get().input["items"] == [1, 2, 3]


def test_back_to_runs_leaves_the_form_without_submitting(browser, transactional_db):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/new/?workflow=typed-order")
    page.get_by_label("customer").fill("ann")
    page.get_by_role("link", name="Back to runs").click()
    wait_for_address(page, lambda url: url.endswith("/runs/"), "the runs list")
    expect(page.get_by_role("heading", name="Runs", level=1)).to_be_visible()
    expect(page.locator("#runs > p.muted")).to_have_text("0 runs")
    assert Run.objects.count() == 0


def test_a_viewer_is_refused_the_new_run_page_saying_why(browser, transactional_db):
    make_user("victor", "viewers")
    browser.allow_status(403)
    browser.login("victor", PASSWORD)
    page = browser.goto("/runs/")
    expect(page.get_by_role("link", name="New run…")).to_have_count(0)  # not offered
    browser.goto("/runs/new/")  # the address typed anyway
    expect(page.get_by_role("heading", name="Not allowed", level=1)).to_be_visible()
    main = page.get_by_role("main")
    expect(main).to_contain_text("Your account (victor) does not have the role")
    expect(main).to_contain_text("this needs the submitter or operator role")
    expect(page.get_by_role("button", name="Submit run")).to_have_count(0)
    browser.check_accessibility("the new run page refused to a viewer")
    browser.screenshot("submit-form-refused-viewer", width=390)
    page.get_by_role("navigation", name="main").get_by_role("link", name="Runs").click()
    wait_for_address(page, lambda url: url.endswith("/runs/"), "the runs list")


def test_a_deadline_the_earlier_of_two_applies_and_one_in_the_past_is_refused(
    browser, transactional_db
):
    """The deadline field (docs/operating.md#deadlines): minutes from now; a workflow's
    own deadline is said beside it, and the earlier of the two applies."""
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.goto("/runs/new/?workflow=deadline-order")
    deadline = page.get_by_label("Deadline, in minutes from now (optional)")
    expect(deadline).to_have_accessible_description(
        re.compile(r"ends as a cancel would.*This workflow gives each run 6 s from its submission")
    )

    # 0.05 minutes (3 s) is earlier than the workflow's 6 s: the form's applies.
    deadline.fill("0.05")
    before = timezone.now()
    page.get_by_role("button", name="Submit run").click()
    wait_for_address(page, lambda url: re.search(r"/runs/[0-9a-f-]{36}/$", url), "the run page")
    after = timezone.now()
    run = Run.objects.get()
    assert before + timedelta(seconds=3) <= run.deadline_at <= after + timedelta(seconds=3)
    expect(page.locator("dd.deadline")).to_be_visible()
    page.go_back()
    expect(page.get_by_role("heading", name="New run", level=1)).to_be_visible()
    page.go_forward()
    expect(page.get_by_role("heading", level=1)).to_contain_text("deadline-order@1")

    page = browser.goto("/runs/new/?workflow=deadline-order")
    page.get_by_label("Deadline, in minutes from now (optional)").fill("0")
    page.get_by_role("button", name="Submit run").click()
    deadline = page.get_by_label("Deadline, in minutes from now (optional)")
    expect(deadline).to_have_attribute("aria-invalid", "true")
    expect(deadline).to_have_accessible_description(re.compile("more than 0 minutes from now"))
    expect(deadline).to_have_value("0")
    assert Run.objects.count() == 1
    browser.check_accessibility("the new run form with a refused deadline")
    browser.screenshot("submit-form-deadline-refused", width=390)
