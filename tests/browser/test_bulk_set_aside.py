"""A bulk decision in a real browser never decides a claim whose evidence contradicts
it, nor one another operator is on: the preview lists them apart, each with its reason
and a link to decide it alone, at a desk's width and a phone's; the confirm decides
the others only. The "late result" badge is in sight at both widths."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from reconciliation import services
from runs.models import Claim
from runs.states import ClaimStatus
from tests.conftest import PASSWORD, make_user
from tests.support import factories

pytestmark = pytest.mark.browser


def claim_row(page, claim):
    """The claim's row in the queue, found by the link to its run (shown at every width)."""
    run_link = page.get_by_role("link", name=f"{str(claim.run_id)[:8]}…", exact=True)
    return page.get_by_role("row").filter(has=run_link)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_bulk_did_not_happen_lists_the_set_aside_claims_apart_with_their_reason(
    browser, transactional_db, width
):
    returned = factories.late_answer_kept("return")  # a late result: the merge happened
    taken = factories.crashed_merge(change_id=5)
    services.take_claim(claim_id=taken.id, user=make_user("bob", "operators"))
    plain = factories.crashed("merge-change", count=2, change_id=6)
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.page
    page.set_viewport_size({"width": width, "height": 900})
    page = browser.goto("/reconciliation/")

    expect(claim_row(page, returned).get_by_text("late result", exact=True)).to_be_visible()
    expect(claim_row(page, taken).get_by_text("bob", exact=True)).to_be_visible()
    bulk = page.get_by_role("form", name="bulk decision", exact=True)
    bulk.get_by_label("Select all claims on this page").check()
    expect(bulk).to_contain_text("4 selected")
    bulk.get_by_label("Outcome").select_option(label="failed: the effect did NOT happen")
    bulk.get_by_label("Note (why)").press_sequentially("none merged on the host")
    bulk.get_by_role("button", name="Preview…").click()

    confirm = page.get_by_role("form", name="confirm bulk decision")
    expect(confirm).to_contain_text("Preview: resolve 2 claims as failed")
    expect(confirm).to_contain_text("2 are set aside, listed below.")
    aside = page.get_by_role("region", name="Set aside: decide one by one (2)")
    expect(aside).to_be_visible()
    items = aside.get_by_role("listitem")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text(
        "a late result says the effect happened: attempt 1 returned"
    )
    expect(items.nth(0)).to_contain_text("deciding it as failed could repeat it")
    expect(items.nth(1)).to_contain_text(re.compile(r"bob is on it \(until \S+\)"))
    link = items.nth(0).get_by_role("link")
    expect(link).to_have_attribute("href", f"/reconciliation/claims/{returned.pk}/")
    browser.check_accessibility(f"the bulk preview with claims set aside at {width} px")
    shot = browser.screenshot("bulk-set-aside-preview", width=width)
    assert shot.exists()

    confirm.get_by_role("button", name="Confirm: resolve 2 claims").click()

    result = page.get_by_role("region", name="bulk result")
    expect(result).to_contain_text(
        "2 claim(s) resolved as failed, 0 refused"
    )  # the set-aside ones were never sent
    for claim in plain:
        expect(claim_row(page, claim)).to_have_count(0)
    expect(claim_row(page, returned)).to_have_count(1)  # still to decide, one by one
    expect(claim_row(page, taken)).to_have_count(1)
    statuses = dict(
        Claim.objects.filter(pk__in=[returned.pk, taken.pk, *(c.pk for c in plain)]).values_list(
            "pk", "status"
        )
    )
    assert [statuses[c.pk] for c in (returned, taken, *plain)] == [
        ClaimStatus.UNRESOLVED,
        ClaimStatus.UNRESOLVED,
        ClaimStatus.FAILED,
        ClaimStatus.FAILED,
    ]
