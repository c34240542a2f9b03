"""The incident replayed in Chromium with a real worker: 400 claims of one cause left by
dead workers, plus claims a bulk decision must not take (a late result says the effect
happened; a colleague is on one). From the overview, all 400 are decided in one round
of five actions: "Decide these…", the outcome, the note, Preview, Confirm. Confirm is
on the first screen at 1280 and at 390 px; the contradicting claims are set aside and
named; the batch's progress runs to its end and its result is announced. Back and
Forward walk the overview, the preview and the batch."""

from __future__ import annotations

import re

import pytest
from django.db.models import Count
from playwright.sync_api import expect

from config.celery import app
from reconciliation import services
from runs.models import Batch, Claim
from runs.states import BatchStatus, ClaimStatus
from tests.browser.conftest import wait_for_address
from tests.conftest import PASSWORD, make_user
from tests.support import factories

pytestmark = [pytest.mark.browser, pytest.mark.workers]

INCIDENT = 400


def test_an_incident_of_400_claims_is_decided_from_the_overview_in_five_actions(cluster, browser):
    # 402 claims of one cause ("worker worker-N died (lease expired)" each). Two must not
    # be decided in bulk as failed: a late result kept on one says the merge happened
    # (as settle_late_finish keeps it), and a colleague is on the other.
    *outage, returned, taken = factories.crashed("merge-change", INCIDENT + 2)
    Claim.objects.filter(pk=returned.pk).update(
        evidence={"late_result": {"merge_id": 77}, "late_attempt": 1}
    )
    services.take_claim(claim_id=taken.pk, user=make_user("bob", "operators"))
    app.control.purge()  # the factories' step messages: their attempts are long dead
    make_user("olivia", "operators")
    cluster.worker()
    browser.login("olivia", PASSWORD)
    page = browser.page

    # The overview shows the incident as one thing: its count, cause and controls.
    incidents = page.get_by_role("list", name="Incidents: unresolved claims by cause")
    group = incidents.get_by_role("listitem").filter(
        has=page.get_by_role("heading", name=re.compile(r"^402 claims · merge-change · merge"))
    )
    expect(group).to_contain_text("worker died (lease expired)")
    expect(group).to_contain_text("1 with a late answer or an inconclusive probe")
    expect(group).to_contain_text("1 taken by an operator")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        browser.check_accessibility(f"the overview with an incident at {width} px")
    page.set_viewport_size({"width": 1280, "height": 900})
    browser.screenshot("incident-overview")
    browser.screenshot("incident-overview", width=390)
    overview_url = f"{browser.base_url}/"

    # 1. Decide these…
    group.get_by_role("link", name="Decide these…").click()
    expect(page.get_by_role("heading", name="Decide 402 claims")).to_be_visible()
    form = page.get_by_role("form", name="decide every matching claim")
    # No outcome is chosen for the operator.
    for choice in form.get_by_role("radio").all():
        expect(choice).not_to_be_checked()
    # 2. the outcome; 3. the note; 4. Preview…
    form.get_by_label("failed: the effect did NOT happen").check()
    form.get_by_label(re.compile("^Note")).fill("the code host was down: none merged")
    form.get_by_role("button", name="Preview…").click()

    summary = page.get_by_role("heading", name="Preview: resolve 400 claims as failed")
    expect(summary).to_be_visible()
    preview_url = page.url
    assert "preview=1" in preview_url and "outcome=failed" in preview_url
    confirm = page.get_by_role("button", name="Confirm: resolve 400 claims as failed")
    aside = page.get_by_role("region", name="Set aside: decide one by one (2)")
    items = aside.get_by_role("listitem")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("a late result says the effect happened: attempt 1")
    expect(items.nth(1)).to_contain_text(re.compile(r"bob is on it \(until \S+\)"))
    expect(page.get_by_role("region", name="What it does")).to_contain_text(
        "400 claims: step merge retried: attempt 2 of 3; the run resumes"
    )
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.evaluate("window.scrollTo(0, 0)")
        expect(confirm).to_be_in_viewport()  # no scrolling to reach it
        browser.check_accessibility(f"the decision's preview at {width} px")
    page.set_viewport_size({"width": 1280, "height": 900})
    browser.screenshot("incident-preview")
    browser.screenshot("incident-preview", width=390)

    # 5. Confirm: the batch's page follows it to the end and says how it went.
    confirm.click()
    batch = Batch.objects.get(operation="resolve")
    batch_url = f"{browser.base_url}/runs/batches/{batch.id}/"
    wait_for_address(page, lambda url: url == batch_url, batch_url)
    # Who made it and when, as a time of day: drawn once, it does not claim "1 s ago"
    # while the progress polls on beneath it.
    expect(
        page.get_by_text(re.compile(r"^olivia,\s+at \d\d:\d\d:\d\d on \d{4}-\d\d-\d\d$"))
    ).to_be_visible()
    progress = page.get_by_role("progressbar", name="402 of 402 claims done")
    expect(progress).to_be_visible(timeout=120_000)
    expect(page.locator("#count-applied")).to_have_text("400")
    expect(page.locator("#count-set-aside")).to_have_text("2")
    expect(page.get_by_role("status").filter(has_text=f"Batch {batch.id} succeeded")).to_have_text(
        f"Batch {batch.id} succeeded: 400 applied, 0 refused, 0 failed, 2 set aside."
    )
    said = page.get_by_role("list", name="What happened, counted")
    expect(said.get_by_role("listitem").first).to_contain_text(re.compile(r"^400 applied"))
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        browser.check_accessibility(f"the decision's batch, done, at {width} px")
    page.set_viewport_size({"width": 1280, "height": 900})
    browser.screenshot("incident-batch")
    browser.screenshot("incident-batch", width=390)

    statuses = dict(
        Claim.objects.filter(pk__in=[c.pk for c in outage])
        .values("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    assert statuses == {ClaimStatus.FAILED: INCIDENT}
    assert Claim.objects.get(pk=taken.pk).status == ClaimStatus.UNRESOLVED
    assert Claim.objects.get(pk=returned.pk).status == ClaimStatus.UNRESOLVED
    assert Batch.objects.get(pk=batch.id).status == BatchStatus.SUCCEEDED

    # Back: the preview again, read now (nothing left to decide but the two set aside);
    # Back again: the overview; Forward: the preview.
    page.go_back()
    wait_for_address(page, lambda url: url == preview_url, preview_url)
    expect(page.get_by_text("Nothing to resolve in bulk:")).to_be_visible()
    page.go_back()
    page.go_back()
    wait_for_address(page, lambda url: url == overview_url, overview_url)
    expect(
        incidents.get_by_role("heading", name=re.compile(r"^2 claims · merge-change · merge"))
    ).to_be_visible()
    page.go_forward()
    page.go_forward()
    wait_for_address(page, lambda url: url == preview_url, preview_url)

    # "Change the decision": the form again, nothing chosen; Back: the preview.
    page.get_by_role("link", name="Change the decision").click()
    expect(page.get_by_role("form", name="decide every matching claim")).to_be_visible()
    for choice in page.get_by_role("radio").all():
        expect(choice).not_to_be_checked()
    page.go_back()
    wait_for_address(page, lambda url: url == preview_url, preview_url)

    # The batch's results by status, and back to the queue with its filter.
    page.goto(batch_url)
    page.get_by_role("navigation", name="results by status").get_by_role(
        "link", name="set aside"
    ).click()
    rows = page.get_by_role("region", name="Results").get_by_role("row")
    expect(rows).to_have_count(3)  # the header and the two set aside
    page.get_by_role("link", name="The queue, with this filter").click()
    wait_for_address(page, lambda url: "/reconciliation/?workflow=merge-change" in url, "queue")
    expect(page.get_by_role("heading", level=1)).to_contain_text("2 of 2 unresolved claims")
    page.go_back()
    expect(rows).to_have_count(3)
